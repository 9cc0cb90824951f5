// CoordinatorStore: runtime::Store served by the coordinator's key-value store, so collectives
// bootstrap through the only rendezvous point of the job.
#pragma once

#include "runtime/comm/store.h"
#include "worker/coordinator_client.h"

namespace ds::worker {

class CoordinatorStore : public runtime::Store {
 public:
  explicit CoordinatorStore(CoordinatorClient& client) : client_(client) {}

  void set(const std::string& key, const std::string& value) override { client_.kvSet(key, value); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return client_.kvGet(key, timeout);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    client_.kvWait(keys, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return client_.kvAdd(key, delta); }
  void multiSet(const std::vector<std::pair<std::string, std::string>>& entries) override {
    client_.kvMultiSet(entries);
  }
  std::vector<std::string> multiGet(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout) override {
    return client_.kvMultiGet(keys, timeout);
  }

 private:
  CoordinatorClient& client_;
};

}  // namespace ds::worker
