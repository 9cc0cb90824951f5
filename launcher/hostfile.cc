// Hostfile parsing, a hand-written matcher for DeepSpeed's `^(\S+)\s+slots=(\d+)` (runner.py
// _parse_hostfile). Character classes are ASCII only: Python's Unicode-aware \s, \S, \d and
// str.strip() are not reproduced for non-ASCII characters (e.g. U+00A0 counts as part of a name).
#include "launcher/hostfile.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include "common/error.h"
#include "common/files.h"
#include "common/printable.h"

namespace ds::launcher {
namespace {

// The ASCII part of Python's str.isspace() / re's \s: includes \x1c-\x1f, unlike C's isspace().
bool isSpace(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Python opens the file in universal-newline mode, so "\r\n", "\r" and "\n" all end a line.
// Line numbers in messages count lines that way.
std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// Matches a stripped line against ^(\S+)\s+slots=([^\s#]+). \S+ can only end where whitespace
// starts and \s+ must eat all of it before "slots=", so the regex has no real backtracking.
bool matchEntry(std::string_view line, std::string_view& host, std::string_view& slots) {
  size_t i = 0;
  while (i < line.size() && !isSpace(line[i])) ++i;
  if (i == 0) return false;
  host = line.substr(0, i);
  const size_t spaceStart = i;
  while (i < line.size() && isSpace(line[i])) ++i;
  if (i == spaceStart) return false;
  constexpr std::string_view kSlots = "slots=";
  if (line.substr(i, kSlots.size()) != kSlots) return false;
  i += kSlots.size();
  // The whole word after "slots=", up to a space or a comment: the caller takes its leading
  // digits, as DeepSpeed's \d+ does, and judges the rest.
  const size_t valueStart = i;
  while (i < line.size() && !isSpace(line[i]) && line[i] != '#') ++i;
  if (i == valueStart) return false;
  slots = line.substr(valueStart, i - valueStart);
  return true;
}

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not well-formed (overlong forms,
// surrogates and code points above U+10FFFF included).
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t n = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
  if (n == 0 || b > 0xf4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  if ((b == 0xe0 && byte(i + 1) < 0xa0) || (b == 0xed && byte(i + 1) > 0x9f) ||
      (b == 0xf0 && byte(i + 1) < 0x90) || (b == 0xf4 && byte(i + 1) > 0x8f))
    return 0;
  return n;
}

// Whether `rest`, after the leading digits of a slots value, makes the value a number in another
// notation ("1e3", "0x10", "2.5", "1_000"), which DeepSpeed's \d+ would silently read as another
// number (1, 0, 2, 1): refused. Other text after the digits ("3abc") is only ignored there.
bool otherNotation(std::string_view digits, std::string_view rest) {
  // Whether rest[i] is one of `chars`.
  const auto at = [&](size_t i, std::string_view chars) {
    return i < rest.size() && chars.find(rest[i]) != std::string_view::npos;
  };
  constexpr std::string_view kDecimal = "0123456789";
  switch (rest.front()) {
    case '.':
      return true;
    case '_':
      return at(1, kDecimal);
    case 'e':
    case 'E':
      return at(1, kDecimal) || (at(1, "+-") && at(2, kDecimal));
    case 'x':
    case 'X':
      return digits == "0" && at(1, "0123456789abcdefABCDEF");
    case 'o':
    case 'O':
      return digits == "0" && at(1, "01234567");
    case 'b':
    case 'B':
      return digits == "0" && at(1, "01");
    default:
      return false;
  }
}

bool isBracketedIpv6(std::string_view name) {
  if (name.size() < 3 || name.front() != '[' || name.back() != ']') return false;
  for (char c : name.substr(1, name.size() - 2))
    if (!(isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
      return false;
  return true;
}

}  // namespace

std::string hostNameProblem(std::string_view name) {
  if (name.empty()) return "empty host name";
  if (name.size() > kMaxHostNameBytes)
    return "host name of " + std::to_string(name.size()) + " bytes (at most " +
           std::to_string(kMaxHostNameBytes) + ")";
  if (name.front() == '-')
    return "a host name may not start with '-' (ssh would read it as an option)";
  // pdsh expands "a,b" and "n[1-4]" in -w lists; a bracket is fine only around an IPv6 address.
  const bool ipv6 = isBracketedIpv6(name);
  for (size_t i = 0; i < name.size();) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const size_t n = utf8SequenceLength(name, i);
    if (n == 0) return "host name is not valid UTF-8 (byte " + std::to_string(i + 1) + ")";
    if (c < 0x20 || c == 0x7f) return "host name contains control byte " + std::to_string(c);
    if (c == ',') return "a host name may not contain ',' (pdsh would read a list of hosts)";
    if ((c == '[' || c == ']') && !ipv6)
      return "a host name may not contain '[' or ']' except around an IPv6 address (pdsh would "
             "expand a range)";
    if (std::string_view("'\"`$;|&<>\\*?(){}!^").find(static_cast<char>(c)) !=
        std::string_view::npos)
      return std::string("host name contains shell metacharacter '") + static_cast<char>(c) + "'";
    i += n;
  }
  return "";
}

std::vector<HostEntry> parseHostfile(std::string_view text, std::string_view path,
                                     std::vector<std::string>* warnings) {
  const std::string where(path);
  std::vector<HostEntry> entries;
  std::unordered_map<std::string, size_t> firstLine;  // host -> line it was first seen on
  int64_t totalSlots = 0;
  // A byte-order mark some editors write would otherwise be part of the first host's name (and
  // 127.0.0.1 would no longer be a loopback host).
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  if (text.substr(0, kUtf8Bom.size()) == kUtf8Bom) text.remove_prefix(kUtf8Bom.size());
  const std::vector<std::string_view> lines = splitLines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    const size_t lineNo = n + 1;
    const std::string_view line = strip(lines[n]);
    if (line.empty() || line.front() == '#') continue;
    const std::string at = where + ":" + std::to_string(lineNo) + ": ";

    std::string_view host;
    std::string_view value;
    if (!matchEntry(line, host, value)) {
      throw Error(at + "bad entry \"" + std::string(line) + "\": expected \"HOST slots=N\"");
    }
    size_t end = 0;
    while (end < value.size() && isDigit(value[end])) ++end;
    const std::string_view digits = value.substr(0, end), rest = value.substr(end);
    if (digits.empty() || (!rest.empty() && otherNotation(digits, rest)))
      throw Error(at + "slots=" + std::string(value) +
                  ": expected a whole number in plain decimal digits, e.g. slots=4");
    if (!rest.empty() && warnings)
      warnings->push_back(at + "slots=" + printable(value) +
                          ": read as slots=" + std::string(digits) +
                          ", as DeepSpeed's runner reads it (the leading digits; \"" +
                          printable(rest) + "\" is ignored); write slots=" + std::string(digits));
    // Python's int() takes any number of digits; leading zeros are fine ("007" is 7).
    int64_t slots = 0;
    for (char c : digits) {
      slots = slots * 10 + (c - '0');
      if (slots > std::numeric_limits<int>::max()) {
        throw Error(at + "slots value in \"" + std::string(line) + "\" is too large");
      }
    }
    if (const std::string problem = hostNameProblem(host); !problem.empty())
      throw Error(at + problem + "; rename the host (an address or DNS name works)");
    totalSlots += slots;
    if (totalSlots > kMaxTotalSlots)
      throw Error(at + "the hostfile's slots add up to more than " +
                  std::to_string(kMaxTotalSlots) + " ranks, the most one job may have");
    auto [it, inserted] = firstLine.emplace(std::string(host), lineNo);
    if (!inserted) {
      throw Error(at + "multiple entries for host " + std::string(host) + " (first on line " +
                  std::to_string(it->second) + ")");
    }
    entries.push_back(HostEntry{std::string(host), static_cast<int>(slots)});
  }
  if (entries.empty()) {
    throw Error(where +
                ": hostfile is empty or not formatted correctly: expected lines like "
                "\"worker-0 slots=4\"");
  }
  return entries;
}

std::optional<std::vector<HostEntry>> readHostfile(const std::string& path,
                                                   std::vector<std::string>* warnings) {
  // os.path.isfile: follows symlinks; a missing path or a directory means local mode.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  // A million hosts fit in 64 MiB; a larger file is not a hostfile (and never read whole).
  return parseHostfile(readWholeFile(path, "hostfile"), path, warnings);
}

}  // namespace ds::launcher
