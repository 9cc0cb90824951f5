#include "runtime/comm/gloo_mesh.h"

#include <gloo/transport/context.h>

#include <utility>
#include <vector>

namespace ds::runtime {
namespace {

// The address rank `from` opened for its pair with rank `to`.
std::string pairKey(const std::string& prefix, int from, int to) {
  return prefix + "/pair/" + std::to_string(from) + "/" + std::to_string(to);
}

}  // namespace

void GlooMeshContext::connect(Store& store, const std::string& prefix,
                              std::shared_ptr<::gloo::transport::Device> device) {
  device_ = std::move(device);
  transportContext_ = device_->createContext(rank, size);
  transportContext_->setTimeout(getTimeout());
  std::vector<std::pair<std::string, std::string>> mine;
  std::vector<std::string> theirs;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char> address = transportContext_->createPair(peer)->address().bytes();
    mine.emplace_back(pairKey(prefix, rank, peer), std::string(address.begin(), address.end()));
    theirs.push_back(pairKey(prefix, peer, rank));
  }
  if (theirs.empty()) return;
  store.multiSet(mine);
  const std::vector<std::string> addresses = store.multiGet(theirs, getTimeout());
  size_t next = 0;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::string& address = addresses[next++];
    transportContext_->getPair(peer)->connect(std::vector<char>(address.begin(), address.end()));
  }
}

}  // namespace ds::runtime
