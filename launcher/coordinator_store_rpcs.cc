// The coordinator's key-value store calls: sets and adds finish at once; reads and waits park a
// callback in the MemoryStore until their keys exist (no thread is held while they wait). Each
// call is admitted (token, epoch) first, as every call is.
#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "launcher/coordinator_state.h"

namespace ds::launcher {
namespace {

// Bounds any single blocking store call, whatever the client asks for.
constexpr uint32_t kMaxStoreWaitMs = 10 * 60 * 1000;

std::chrono::milliseconds storeTimeout(uint32_t requestedMs) {
  return std::chrono::milliseconds(std::min(requestedMs, kMaxStoreWaitMs));
}

grpc::Status storeError(const Error& e) {
  if (dynamic_cast<const TimeoutError*>(&e))
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, e.what());
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e.what());
}

// A KvGet, KvWait or KvMultiGet parked in the store until its keys exist.
class StoreWait final : public grpc::ServerUnaryReactor {
 public:
  explicit StoreWait(runtime::MemoryStore& store) : store_(store) {}
  // The store's wait id, shared with the handler that learns it after this may be gone.
  std::shared_ptr<std::atomic<uint64_t>> id = std::make_shared<std::atomic<uint64_t>>(0);
  void OnCancel() override { store_.cancelWait(id->load()); }  // completes it with an error
  void OnDone() override { delete this; }

 private:
  runtime::MemoryStore& store_;
};

}  // namespace

template <typename Request, typename Operation>
grpc::ServerUnaryReactor* Coordinator::State::storeCall(grpc::CallbackServerContext* context,
                                                        const Request* request, const char* rpc,
                                                        Operation operation) {
  if (auto status = admit(context, request->auth(), rpc); !status.ok())
    return finished(context, status);
  try {
    operation();
  } catch (const Error& e) {
    return finished(context, storeError(e));
  }
  return finished(context, grpc::Status::OK);
}

template <typename Request, typename Fill>
grpc::ServerUnaryReactor* Coordinator::State::storeWait(grpc::CallbackServerContext* context,
                                                        const Request* request, const char* rpc,
                                                        std::vector<std::string> keys, Fill fill) {
  if (auto status = admit(context, request->auth(), rpc); !status.ok())
    return finished(context, status);
  auto* wait = new StoreWait(store);
  const std::shared_ptr<std::atomic<uint64_t>> id = wait->id;
  try {
    // `wait` may be finished and deleted before waitAsync returns: only `id` is touched after.
    id->store(
        store.waitAsync(std::move(keys), storeTimeout(request->timeout_ms()),
                        [wait, fill](std::exception_ptr error, std::vector<std::string> values) {
                          grpc::Status status = grpc::Status::OK;
                          try {
                            if (error) std::rethrow_exception(error);
                            fill(values);
                          } catch (const Error& e) {
                            status = storeError(e);
                          }
                          wait->Finish(status);
                        }));
  } catch (const Error& e) {  // refused before anything was parked (too many keys)
    delete wait;
    return finished(context, storeError(e));
  }
  return wait;
}

grpc::ServerUnaryReactor* Coordinator::State::KvSet(grpc::CallbackServerContext* context,
                                                    const proto::KvSetRequest* request,
                                                    proto::KvSetReply*) {
  return storeCall(context, request, "KvSet", [&] { store.set(request->key(), request->value()); });
}

grpc::ServerUnaryReactor* Coordinator::State::KvMultiSet(grpc::CallbackServerContext* context,
                                                         const proto::KvMultiSetRequest* request,
                                                         proto::KvMultiSetReply*) {
  return storeCall(context, request, "KvMultiSet", [&] {
    std::vector<std::pair<std::string, std::string>> entries;
    entries.reserve(request->entries_size());
    for (const auto& entry : request->entries()) entries.emplace_back(entry.key(), entry.value());
    store.multiSet(entries);
  });
}

grpc::ServerUnaryReactor* Coordinator::State::KvGet(grpc::CallbackServerContext* context,
                                                    const proto::KvGetRequest* request,
                                                    proto::KvGetReply* reply) {
  return storeWait(
      context, request, "KvGet", {request->key()},
      [reply](std::vector<std::string>& values) { reply->set_value(std::move(values.front())); });
}

grpc::ServerUnaryReactor* Coordinator::State::KvMultiGet(grpc::CallbackServerContext* context,
                                                         const proto::KvMultiGetRequest* request,
                                                         proto::KvMultiGetReply* reply) {
  return storeWait(context, request, "KvMultiGet", {request->keys().begin(), request->keys().end()},
                   [reply](std::vector<std::string>& values) {
                     for (auto& value : values) reply->add_values(std::move(value));
                   });
}

grpc::ServerUnaryReactor* Coordinator::State::KvWait(grpc::CallbackServerContext* context,
                                                     const proto::KvWaitRequest* request,
                                                     proto::KvWaitReply*) {
  return storeWait(context, request, "KvWait", {request->keys().begin(), request->keys().end()},
                   [](std::vector<std::string>&) {});
}

grpc::ServerUnaryReactor* Coordinator::State::KvAdd(grpc::CallbackServerContext* context,
                                                    const proto::KvAddRequest* request,
                                                    proto::KvAddReply* reply) {
  return storeCall(context, request, "KvAdd",
                   [&] { reply->set_value(store.add(request->key(), request->delta())); });
}

}  // namespace ds::launcher
