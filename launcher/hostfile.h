// DeepSpeed hostfile ("worker-0 slots=4" per line): parsing with DeepSpeed's exact grammar and
// errors that name the file and line. Does not apply --include/--exclude or check reachability.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::launcher {

struct HostEntry {
  std::string host;
  int slots;
};

// Parses DeepSpeed's hostfile grammar (DEEPSPEED-SEMANTICS.md section 2): each line stripped,
// whole-line '#' comments and blank lines skipped, prefix match ^(\S+)\s+slots=(\d+) with the rest
// of the line ignored, slots=0 accepted, first error in file order wins. Result in file order.
// Throws ds::Error "PATH:LINE: message", or "PATH: ..." when the file names no host.
std::vector<HostEntry> parseHostfile(std::string_view text, std::string_view path);

// nullopt when `path` is not an existing regular file (DeepSpeed's local mode); a file that
// exists but cannot be read is an error.
std::optional<std::vector<HostEntry>> readHostfile(const std::string& path);

}  // namespace ds::launcher
