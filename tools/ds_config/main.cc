// ds-config: inspect a DeepSpeed config without starting a job. Only dispatches: each subcommand
// lives in its own file (check_command.cc with policy and neox-keys, schedule_command.cc, memory_command.cc).
#include <CLI/CLI.hpp>
#include <iostream>

#include "common/error.h"
#include "common/guarded_main.h"
#include "tools/ds_config/commands.h"

namespace {
constexpr int kInvalidInput = 2;  // bad config, missing file or bad flag
}

int run(int argc, char** argv) {
  CLI::App app{"ds-config: check a DeepSpeed config and show what it resolves to"};
  app.require_subcommand(1);
  ds::tools::addCheckCommand(app);
  ds::tools::addPolicyCommand(app);
  ds::tools::addNeoxKeysCommand(app);
  ds::tools::addScheduleCommand(app);
  ds::tools::addMemoryCommand(app);
  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and usage to stderr
    return kInvalidInput;
  } catch (const ds::Error& e) {
    std::cerr << "ds-config: error: " << e.what() << '\n';
    return kInvalidInput;
  }
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("ds-config", [&] { return run(argc, argv); });
}
