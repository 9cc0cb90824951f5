// ds-config: inspect a DeepSpeed config without starting a job. Only dispatches: each subcommand
// lives in its own file (check_command.cc with policy and neox-keys, schedule_command.cc, memory_command.cc).
#include <CLI/CLI.hpp>

#include "common/command_line.h"
#include "common/guarded_main.h"
#include "tools/ds_config/commands.h"

int run(int argc, char** argv) {
  CLI::App app{"ds-config: check a DeepSpeed config and show what it resolves to"};
  app.require_subcommand(1);
  ds::tools::addCheckCommand(app);
  ds::tools::addPolicyCommand(app);
  ds::tools::addNeoxKeysCommand(app);
  ds::tools::addScheduleCommand(app);
  ds::tools::addMemoryCommand(app);
  // The chosen subcommand's callback runs inside; a ds::Error it throws (bad config, missing
  // file) exits 2 through guardedMain, as a bad flag does here.
  return ds::parseCommandLine(app, argc, argv).value_or(0);
}

int main(int argc, char** argv) {
  return ds::guardedMain("ds-config", [&] { return run(argc, argv); });
}
