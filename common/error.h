// The one exception type the project throws for bad input and failed operations.
// Messages name the place (file:line, JSON path, peer rank/host) and the fix; callers at the
// process edge (main) print what() and choose the exit code. Library code never calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace ds {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A peer, store key or collective did not answer in time. Recoverable: the caller tears down
// and may re-form the group.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

}  // namespace ds
