// Small file-system helpers shared by ds-launch and ds-worker.
#pragma once

#include <cstddef>
#include <string>

namespace ds {

// The whole file, at most maxBytes of it (a device file or a log given by mistake must not fill
// memory); throws ds::Error "PATH: cannot read WHAT: REASON" or "PATH: larger than N MiB; not a
// WHAT" (WHAT says what the file should be, or the flag that named it).
std::string readWholeFile(const std::string& path, const std::string& what,
                          size_t maxBytes = size_t{64} << 20);

// Whether `program` is an executable file: a path as given, or a name found on $PATH.
bool isExecutableOnPath(const std::string& program);

}  // namespace ds
