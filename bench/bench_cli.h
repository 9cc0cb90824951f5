// Command lines of the benches: CLI11 parses the flags, checks their ranges and prints --help
// (with every default); this only maps its outcome onto the exit statuses the benches share.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

namespace ds::bench {

// Call before adding options: --help then shows each option's default value.
inline void showDefaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

// An exit status when the bench must stop here: 0 after --help, 2 after a bad command line
// ("error: " and CLI11's message, which names the flag, then a usage hint on stderr); nothing
// when the bench should run.
inline std::optional<int> parseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\nRun with --help for more information.\n",
                 app.get_name().c_str(), e.what());
    return 2;
  }
  return std::nullopt;
}

}  // namespace ds::bench
