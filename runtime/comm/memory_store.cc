// MemoryStore: map + condition variable; blocking reads wait on the condition with a deadline.
#include "runtime/comm/memory_store.h"

#include <charconv>

#include "common/error.h"

namespace ds::runtime {
namespace {

std::string joinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ", ";
    out += '"' + key + '"';
  }
  return out;
}

}  // namespace

void MemoryStore::throwIfClosed() const {
  if (closed_) throw Error("store closed: " + closeReason_);
}

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mutex_);
    throwIfClosed();
    values_[key] = value;
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
      throw TimeoutError("store: key \"" + key + "\" was not set within " +
                         std::to_string(timeout.count()) + " ms");
    }
  }
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
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
    auto& text = values_[key];
    if (!text.empty()) {
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size())
        throw Error("store: add on key \"" + key + "\" which holds a non-integer value");
    }
    value += delta;
    text = std::to_string(value);
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
