// GlooMeshContext: a Gloo context whose full mesh is rendezvoused in two store round trips per
// rank. Gloo's own connectFullMesh (the Debian version) publishes one value per rank that holds
// the addresses of all its pairs, then waits for and reads every other rank's value one call at a
// time: 2(n - 1) round trips and n^2 address bytes per rank, n^3 through the store in all (what
// made PyTorch's Gloo init take 55 minutes at 8192 ranks before it batched its reads). Here a rank
// publishes the address of its pair with each peer under its own key in one multiSet, and reads
// the n - 1 addresses meant for it in one multiGet: O(n) bytes per rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include "runtime/comm/store.h"

namespace ds::runtime {

class GlooMeshContext : public ::gloo::Context {
 public:
  GlooMeshContext(int rank, int size) : ::gloo::Context(rank, size) {}
  // Collective over the `size` ranks; keys under `prefix`. Throws ds::Error / TimeoutError (a peer
  // that never published), or gloo::Exception from a pair's connection.
  void connect(Store& store, const std::string& prefix,
               std::shared_ptr<::gloo::transport::Device> device);
};

}  // namespace ds::runtime
