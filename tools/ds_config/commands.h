// The ds-config subcommands. Each adds itself to the app with its options; its callback does the
// work, writes results to stdout and warnings to stderr, and throws ds::Error on invalid input
// (main turns that into exit status 2).
#pragma once

#include <CLI/CLI.hpp>

namespace ds::tools {

// ds-config check CONFIG [--world-size N] [--json]
void addCheckCommand(CLI::App& app);
// ds-config policy: the config policy table, one key per line (path | effect | note)
void addPolicyCommand(CLI::App& app);
// ds-config neox-keys: the NeoX key table as Markdown (docs/neox-arguments.md)
void addNeoxKeysCommand(CLI::App& app);
// ds-config schedule CONFIG --steps N [--json]
void addScheduleCommand(CLI::App& app);
// ds-config memory CONFIG --params P [--world-size N] [--json]
void addMemoryCommand(CLI::App& app);

}  // namespace ds::tools
