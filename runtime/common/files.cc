// readWholeFile / isExecutableOnPath.
#include "runtime/common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace ds {
namespace {

bool isExecutableFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string readWholeFile(const std::string& path, const std::string& what, size_t maxBytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(path + ": cannot read " + what + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > maxBytes)
      throw Error(path + ": larger than " + std::to_string(maxBytes >> 20) + " MiB; not a " + what);
  }
  if (in.bad()) throw Error(path + ": cannot read " + what + ": " + std::strerror(errno));
  return text;
}

bool isExecutableOnPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return isExecutableFile(program);
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (isExecutableFile((dir.empty() ? "." : dir) + "/" + program)) return true;
  return false;
}

}  // namespace ds
