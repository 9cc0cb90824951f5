// MemoryStore: map + condition variable; blocking reads wait on the condition with a deadline,
// non-blocking ones park a callback under each key they miss (memory_store.h).
#include "runtime/comm/memory_store.h"

#include <charconv>
#include <unordered_set>

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

// The one timeout message of every wait, blocking or not: it names the keys still missing.
TimeoutError notSetWithin(const std::vector<std::string>& missing,
                          std::chrono::milliseconds timeout) {
  const std::string what = missing.size() == 1 ? "key \"" + shortKey(missing[0]) + "\" was"
                                               : "keys " + joinKeys(missing) + " were";
  return TimeoutError("store: " + what + " not set within " + std::to_string(timeout.count()) +
                      " ms");
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

bool MemoryStore::store(const std::string& key, std::string value) {
  checkRoom(key, value.size());
  auto [it, inserted] = values_.try_emplace(key);
  totalBytes_ -= inserted ? 0 : key.size() + it->second.size();
  totalBytes_ += key.size() + value.size();
  it->second = std::move(value);
  return inserted;
}

void MemoryStore::checkWaitSize(size_t keys) const {
  if (keys > limits_.maxKeysPerWait)
    throw Error("store: wait on " + std::to_string(keys) + " keys, at most " +
                std::to_string(limits_.maxKeysPerWait) + " per call");
}

std::vector<std::string> MemoryStore::missingOf(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& key : keys)
    if (!values_.count(key)) missing.push_back(key);
  return missing;
}

std::vector<std::string> MemoryStore::valuesOf(const std::vector<std::string>& keys) const {
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(values_.at(key));
  return values;
}

MemoryStore::Waiter MemoryStore::takeWaiter(uint64_t id) {
  auto it = waiters_.find(id);
  Waiter waiter = std::move(it->second);
  waiters_.erase(it);
  deadlines_.erase({waiter.deadline, id});
  if (waiter.missing > 0)
    for (const auto& key :
         std::unordered_set<std::string>(waiter.keys.begin(), waiter.keys.end())) {
      auto [first, last] = waitingOn_.equal_range(key);
      for (auto entry = first; entry != last; ++entry)
        if (entry->second == id) {
          waitingOn_.erase(entry);
          break;
        }
    }
  return waiter;
}

void MemoryStore::keyAdded(const std::string& key, Ready& ready) {
  auto [first, last] = waitingOn_.equal_range(key);
  std::vector<uint64_t> complete;
  for (auto entry = first; entry != last; ++entry)
    if (--waiters_.at(entry->second).missing == 0) complete.push_back(entry->second);
  waitingOn_.erase(first, last);
  for (uint64_t id : complete) {
    Waiter waiter = takeWaiter(id);
    ready.emplace_back(std::move(waiter.done), valuesOf(waiter.keys));
  }
}

void MemoryStore::set(const std::string& key, const std::string& value) {
  Ready ready;
  {
    std::lock_guard lock(mutex_);
    throwIfClosed();
    if (store(key, value)) keyAdded(key, ready);
  }
  changed_.notify_all();
  for (auto& [done, values] : ready) done(nullptr, std::move(values));
}

void MemoryStore::multiSet(const std::vector<std::pair<std::string, std::string>>& entries) {
  Ready ready;
  {
    std::lock_guard lock(mutex_);
    throwIfClosed();
    for (const auto& [key, value] : entries)
      if (store(key, value)) keyAdded(key, ready);
  }
  changed_.notify_all();
  for (auto& [done, values] : ready) done(nullptr, std::move(values));
}

std::vector<std::string> MemoryStore::multiGet(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) {
  wait(keys, timeout);
  std::lock_guard lock(mutex_);
  throwIfClosed();
  return valuesOf(keys);
}

uint64_t MemoryStore::waitAsync(std::vector<std::string> keys, std::chrono::milliseconds timeout,
                                WaitDone done) {
  checkWaitSize(keys.size());
  std::exception_ptr error;
  std::vector<std::string> values;
  uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    if (closed_) {
      error = std::make_exception_ptr(Error("store closed: " + closeReason_));
    } else {
      std::unordered_set<std::string> missing;
      for (const auto& key : keys)
        if (!values_.count(key)) missing.insert(key);
      if (missing.empty()) {
        values = valuesOf(keys);
      } else {
        id = nextWaiter_++;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (const auto& key : missing) waitingOn_.emplace(key, id);
        deadlines_.insert({deadline, id});
        waiters_.emplace(id, Waiter{std::move(keys), missing.size(), deadline, timeout,
                                    std::move(done)});
        if (!timer_.joinable()) timer_ = std::thread([this] { runTimer(); });
        if (deadlines_.begin()->second == id) timerWake_.notify_one();
        return id;
      }
    }
  }
  done(error, std::move(values));
  return 0;
}

void MemoryStore::cancelWait(uint64_t id) {
  std::unique_lock lock(mutex_);
  if (!waiters_.count(id)) return;
  Waiter waiter = takeWaiter(id);
  lock.unlock();
  waiter.done(std::make_exception_ptr(Error("store: wait cancelled")), {});
}

void MemoryStore::runTimer() {
  std::unique_lock lock(mutex_);
  while (!stopTimer_) {
    if (deadlines_.empty()) {
      timerWake_.wait(lock);
      continue;
    }
    const auto [when, id] = *deadlines_.begin();
    if (std::chrono::steady_clock::now() < when) {
      timerWake_.wait_until(lock, when);
      continue;
    }
    Waiter waiter = takeWaiter(id);
    const TimeoutError error = notSetWithin(missingOf(waiter.keys), waiter.timeout);
    lock.unlock();
    waiter.done(std::make_exception_ptr(error), {});
    lock.lock();
  }
}

MemoryStore::~MemoryStore() {
  close("the store was destroyed");
  {
    std::lock_guard lock(mutex_);
    stopTimer_ = true;
  }
  timerWake_.notify_all();
  if (timer_.joinable()) timer_.join();
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
      throw notSetWithin({key}, timeout);
    }
  }
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  checkWaitSize(keys.size());
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    throwIfClosed();
    if (missingOf(keys).empty()) return;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      throwIfClosed();
      const std::vector<std::string> stillMissing = missingOf(keys);
      if (stillMissing.empty()) return;
      throw notSetWithin(stillMissing, timeout);
    }
  }
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  Ready ready;
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
    if (store(key, std::to_string(value))) keyAdded(key, ready);
  }
  changed_.notify_all();
  for (auto& [done, values] : ready) done(nullptr, std::move(values));
  return value;
}

void MemoryStore::close(const std::string& reason) {
  std::vector<WaitDone> parked;
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (!closed_) {
      closed_ = true;
      closeReason_ = reason;
    }
    why = "store closed: " + closeReason_;
    for (auto& [id, waiter] : waiters_) parked.push_back(std::move(waiter.done));
    waiters_.clear();
    waitingOn_.clear();
    deadlines_.clear();
  }
  changed_.notify_all();
  for (auto& done : parked)
    done(std::make_exception_ptr(Error(why)), {});
}

}  // namespace ds::runtime
