// Presents a ds::runtime::Store as the gloo::rendezvous::Store Gloo's rendezvous expects, with
// every key under `prefix` (Gloo's keys are not namespaced: one prefix per membership epoch and
// group).
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>

#include "runtime/comm/store.h"

namespace ds::runtime {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(runtime::Store& store, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Gloo calls get() without waiting first, so get() blocks until the key exists (or times out).
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string prefixed(const std::string& key) const { return prefix_ + "/" + key; }

  runtime::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ds::runtime
