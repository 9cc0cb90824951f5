// Finds the gRPC side: linked in (tests, benches), or loaded from beside the executable; and
// hosts a relay through it only once this process has its socket.
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "common/error.h"
#include "worker/grpc_entry.h"
#include "worker/relay_protocol.h"

// Weak: defined only where the gRPC side is linked in; ds-worker itself leaves it null.
extern "C" const ds::worker::GrpcEntryPoints* ds_worker_grpc_entry() __attribute__((weak));

namespace ds::worker {

const GrpcEntryPoints& grpcEntryPoints() {
  static std::once_flag once;
  static const GrpcEntryPoints* entry = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    if (ds_worker_grpc_entry != nullptr) {
      entry = ds_worker_grpc_entry();
      return;
    }
    std::error_code ignored;
    const std::string path =
        (std::filesystem::read_symlink("/proc/self/exe", ignored).parent_path() /
         "libds-worker-grpc.so")
            .string();
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      failure = "cannot load " + path + " (the worker's gRPC side, built with ds-worker): " +
                dlerror();
      return;
    }
    using Entry = const GrpcEntryPoints* (*)();
    const auto find = reinterpret_cast<Entry>(dlsym(library, "ds_worker_grpc_entry"));
    if (find == nullptr) {
      failure = path + " is not ds-worker's gRPC side (no ds_worker_grpc_entry)";
      return;
    }
    entry = find();
  });
  if (entry == nullptr) throw Error(failure);
  return *entry;
}

std::unique_ptr<RelayHost> hostRelayIfFirst(NodeRelayOptions options) {
  options.listeningFd = listenOnRelaySocket(options.socketName);
  if (options.listeningFd < 0) return nullptr;
  return grpcEntryPoints().hostRelay(std::move(options));
}

}  // namespace ds::worker
