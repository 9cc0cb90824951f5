// The registry of fuzz targets and what they share: the refusal rule, checks, scratch files.
#include "fuzz/fuzz_target.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace ds::fuzz {
namespace {

std::vector<FuzzTarget>& registry() {
  static std::vector<FuzzTarget> targets;
  return targets;
}

// Made on first use, removed when the process exits normally (a crashing run leaves it in the
// temp directory, where the crash can be looked at).
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ds-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("ds-fuzz: mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

const std::vector<FuzzTarget>& fuzzTargets() { return registry(); }

RegisterFuzzTarget::RegisterFuzzTarget(const char* name, FuzzFunction run) {
  registry().push_back({name, run});
}

bool runFuzzTarget(const FuzzTarget& target, const uint8_t* data, size_t size) {
  try {
    target.run(std::string_view(reinterpret_cast<const char*>(data), size));
    return true;
  } catch (const Error&) {
    return false;
  }
}

void fuzzCheckFailed(const char* file, int line, const char* what) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
  std::abort();
}

std::string scratchPath(const std::string& name) {
  static const ScratchDir dir;
  return dir.path() + "/" + name;
}

std::string writeScratchFile(const std::string& name, std::string_view bytes) {
  const std::string path = scratchPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "ds-fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

std::vector<std::string_view> splitInput(std::string_view input, std::string_view separator,
                                         size_t maxParts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < maxParts) {
    const size_t at = input.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + separator.size());
  }
  parts.push_back(input);
  return parts;
}

}  // namespace ds::fuzz
