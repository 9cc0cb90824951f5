// Command lines of the benches: CLI11 parses the flags, checks their ranges and prints --help
// with every default; ds::parseCommandLine (common/command_line.h) maps the outcome onto the exit
// statuses every executable shares.
#pragma once

#include <CLI/CLI.hpp>

#include "common/command_line.h"

namespace ds::bench {

// Call before adding options: --help then shows each option's default value.
inline void showDefaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

}  // namespace ds::bench
