// readWholeFile / isExecutableOnPath.
#include "runtime/common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
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

std::string readWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + " " + path + ": cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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
