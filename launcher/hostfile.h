// DeepSpeed hostfile ("worker-0 slots=4" per line): parsing with DeepSpeed's exact grammar and
// errors that name the file and line. Does not apply --include/--exclude or check reachability.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::launcher {

// Limits that keep a hostile or mistyped hostfile from exhausting memory: one job has at most
// kMaxTotalSlots ranks, and a host name is at most kMaxHostNameBytes (room for user@FQDN).
inline constexpr int64_t kMaxTotalSlots = 65536;
inline constexpr size_t kMaxHostNameBytes = 512;

struct HostEntry {
  std::string host;
  int slots;
};

// Parses DeepSpeed's hostfile grammar (DEEPSPEED-SEMANTICS.md section 2): each line stripped,
// whole-line '#' comments and blank lines skipped, prefix match ^(\S+)\s+slots=(\d+) with the rest
// of the line ignored, slots=0 accepted, first error in file order wins. Result in file order.
// Text right after the digits ("slots=3abc") is ignored as DeepSpeed ignores it, with a
// "PATH:LINE: ..." line added to `warnings` (when given); a value in another notation ("1e3",
// "0x10", "2.5"), which DeepSpeed would read as a different number, is refused.
// Throws ds::Error "PATH:LINE: message", or "PATH: ..." when the file names no host.
std::vector<HostEntry> parseHostfile(std::string_view text, std::string_view path,
                                     std::vector<std::string>* warnings = nullptr);

// Why `name` cannot be used as a host ("" when it can): it must be valid UTF-8 without control
// bytes, must not start with '-' (ssh option), contain ',' or a '[range]' (pdsh expansion, a
// bracketed IPv6 address is fine) or shell metacharacters, and must fit kMaxHostNameBytes.
std::string hostNameProblem(std::string_view name);

// nullopt when `path` is not an existing regular file (DeepSpeed's local mode); a file that
// exists but cannot be read is an error.
std::optional<std::vector<HostEntry>> readHostfile(const std::string& path,
                                                   std::vector<std::string>* warnings = nullptr);

}  // namespace ds::launcher
