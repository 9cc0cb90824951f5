// MemoryStore: map + condition variable; blocking reads wait on the condition with a deadline.
#include "runtime/comm/memory_store.h"

#include <charconv>

#include "common/error.h"

namespace ds::runtime {
namespace {

// The first few keys, each shortened: a timeout over thousands of keys must stay a readable
// message well under gRPC's metadata limit.
std::string joinKeys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 8, kKeyChars = 80;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (!out.empty()) out += ", ";
    out += '"' + keys[i].substr(0, kKeyChars) + (keys[i].size() > kKeyChars ? "...\"" : "\"");
  }
  if (keys.size() > kShown) out += " and " + std::to_string(keys.size() - kShown) + " more";
  return out;
}

std::string shortKey(const std::string& key) {
  return key.size() > 80 ? key.substr(0, 80) + "..." : key;
}

}  // namespace

void MemoryStore::throwIfClosed() const {
  if (closed_) throw Error("store closed: " + closeReason_);
}

void MemoryStore::checkRoom(const std::string& key, size_t valueBytes) const {
  if (key.size() > limits_.maxKeyBytes)
    throw Error("store: key of " + std::to_string(key.size()) + " bytes (\"" + shortKey(key) +
                "\"): at most " + std::to_string(limits_.maxKeyBytes));
  if (valueBytes > limits_.maxValueBytes)
    throw Error("store: value of " + std::to_string(valueBytes) + " bytes for key \"" +
                shortKey(key) + "\": at most " + std::to_string(limits_.maxValueBytes));
  const auto it = values_.find(key);
  if (it == values_.end() && values_.size() >= limits_.maxKeys)
    throw Error("store: " + std::to_string(values_.size()) + " keys already, at most " +
                std::to_string(limits_.maxKeys) + " (key \"" + shortKey(key) + "\")");
  const size_t oldBytes = it == values_.end() ? 0 : key.size() + it->second.size();
  if (totalBytes_ - oldBytes + key.size() + valueBytes > limits_.maxTotalBytes)
    throw Error("store: full (" + std::to_string(totalBytes_) + " bytes held, at most " +
                std::to_string(limits_.maxTotalBytes) + "; key \"" + shortKey(key) + "\")");
}

void MemoryStore::store(const std::string& key, std::string value) {
  checkRoom(key, value.size());
  auto [it, inserted] = values_.try_emplace(key);
  totalBytes_ -= inserted ? 0 : key.size() + it->second.size();
  totalBytes_ += key.size() + value.size();
  it->second = std::move(value);
}

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mutex_);
    throwIfClosed();
    store(key, value);
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    throwIfClosed();
    if (auto it = values_.find(key); it != values_.end()) return it->second;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      throwIfClosed();
      if (auto it = values_.find(key); it != values_.end()) return it->second;
      throw TimeoutError("store: key \"" + shortKey(key) + "\" was not set within " +
                         std::to_string(timeout.count()) + " ms");
    }
  }
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.size() > limits_.maxKeysPerWait)
    throw Error("store: wait on " + std::to_string(keys.size()) + " keys, at most " +
                std::to_string(limits_.maxKeysPerWait) + " per call");
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto missing = [&] {
    std::vector<std::string> out;
    for (const auto& key : keys)
      if (!values_.count(key)) out.push_back(key);
    return out;
  };
  for (;;) {
    throwIfClosed();
    if (missing().empty()) return;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      throwIfClosed();
      auto stillMissing = missing();
      if (stillMissing.empty()) return;
      throw TimeoutError("store: keys " + joinKeys(stillMissing) + " were not set within " +
                         std::to_string(timeout.count()) + " ms");
    }
  }
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard lock(mutex_);
    throwIfClosed();
    if (auto it = values_.find(key); it != values_.end() && !it->second.empty()) {
      const std::string& text = it->second;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size())
        throw Error("store: add on key \"" + shortKey(key) + "\" which holds a non-integer value");
    }
    if (__builtin_add_overflow(value, delta, &value))
      throw Error("store: add of " + std::to_string(delta) + " to key \"" + shortKey(key) +
                  "\" overflows a 64-bit integer");
    store(key, std::to_string(value));
  }
  changed_.notify_all();
  return value;
}

void MemoryStore::close(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    closeReason_ = reason;
  }
  changed_.notify_all();
}

}  // namespace ds::runtime
