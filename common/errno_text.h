// errnoText: how every I/O error names its errno, "No space left on device (ENOSPC, errno 28)",
// so a message says both what happened and the symbol to search for. Not here: the place (file,
// offset), which the caller's message gives.
#pragma once

#include <string>

namespace ds {

std::string errnoText(int err);

}  // namespace ds
