// Which collectives backend a group uses: the config's comm_backend and ds-comm-bench --backend,
// parsed once into this enum. Auto: shared memory on one host, hierarchical across hosts with the
// same number of ranks on each, else flat Gloo (runtime/comm/group_factory.cc decides).
#pragma once

#include <string>

namespace ds {

enum class CommBackend { Auto, Shm, Hierarchical, Gloo };

const char* commBackendName(CommBackend backend);  // "auto", "shm", "hierarchical", "gloo"
// Throws ds::Error "WHERE: expected ..., got ..." for anything else.
CommBackend parseCommBackend(const std::string& text, const std::string& where);

}  // namespace ds
