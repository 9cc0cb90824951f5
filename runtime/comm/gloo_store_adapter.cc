// GlooStoreAdapter: key prefixing and byte-vector <-> string conversion only.
#include "runtime/comm/gloo_store_adapter.h"

namespace ds::runtime {

GlooStoreAdapter::GlooStoreAdapter(runtime::Store& store, std::string prefix,
                                   std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_.set(prefixed(key), std::string(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  std::string value = store_.get(prefixed(key), timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& key : keys) full.push_back(prefixed(key));
  store_.wait(full, timeout);
}

}  // namespace ds::runtime
