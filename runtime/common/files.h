// Small file-system helpers shared by ds-launch and ds-worker.
#pragma once

#include <string>

namespace ds {

// The whole file; throws ds::Error "WHAT PATH: cannot read it" (WHAT is the flag or variable that
// named the file).
std::string readWholeFile(const std::string& path, const std::string& what);

// Whether `program` is an executable file: a path as given, or a name found on $PATH.
bool isExecutableOnPath(const std::string& program);

}  // namespace ds
