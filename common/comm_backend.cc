// CommBackend names: one table for parsing and printing.
#include "common/comm_backend.h"

#include "common/error.h"

namespace ds {
namespace {

struct Entry {
  CommBackend backend;
  const char* name;
};
constexpr Entry kBackends[] = {{CommBackend::Auto, "auto"},
                               {CommBackend::Shm, "shm"},
                               {CommBackend::Hierarchical, "hierarchical"},
                               {CommBackend::Gloo, "gloo"}};

}  // namespace

const char* commBackendName(CommBackend backend) {
  for (const Entry& e : kBackends)
    if (e.backend == backend) return e.name;
  return "?";
}

CommBackend parseCommBackend(const std::string& text, const std::string& where) {
  for (const Entry& e : kBackends)
    if (text == e.name) return e.backend;
  throw Error(where + ": expected \"auto\", \"shm\", \"hierarchical\" or \"gloo\", got \"" + text +
              "\"");
}

}  // namespace ds
