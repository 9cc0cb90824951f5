#include "runtime/comm/store.h"

namespace ds::runtime {

void Store::multiSet(const std::vector<std::pair<std::string, std::string>>& entries) {
  for (const auto& [key, value] : entries) set(key, value);
}

std::vector<std::string> Store::multiGet(const std::vector<std::string>& keys,
                                         std::chrono::milliseconds timeout) {
  wait(keys, timeout);
  std::vector<std::string> values;
  for (const auto& key : keys) values.push_back(get(key, timeout));
  return values;
}

}  // namespace ds::runtime
