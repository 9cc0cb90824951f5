// Every executable's command line ends the same way: CLI11 parses it (and prints --help), and this
// maps the outcome onto one pair of exit statuses, 0 after --help and kUsageExit after a bad
// command line, with one message form ("PROG: error: ..." naming the flag, then a usage hint).
// Header-only: only mains include it, and CLI11 is header-only too.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace ds {

// A command line that cannot be parsed, as for any invalid input: DeepSpeed's argparse exits 2.
inline constexpr int kUsageExit = 2;

// An exit status when the program must stop here (0 after --help, kUsageExit after a bad command
// line, its message on stderr); nothing when it should run.
inline std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string program = std::filesystem::path(app.get_name()).filename().string();
    std::fprintf(stderr, "%s: error: %s\nRun with --help for more information.\n",
                 program.c_str(), e.what());
    return kUsageExit;
  }
  return std::nullopt;
}

}  // namespace ds
