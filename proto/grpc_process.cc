#include "grpc_process.h"

#include <absl/synchronization/mutex.h>
#include <grpc/support/log.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace ds {
namespace {

void dropGrpcLog(gpr_log_func_args*) {}

}  // namespace

void prepareGrpcProcess() {
  static std::once_flag once;
  std::call_once(once, [] {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    const char* keep = std::getenv("DS_GRPC_LOG");
    if (keep == nullptr || std::string(keep) != "1") gpr_set_log_function(dropGrpcLog);
  });
}

}  // namespace ds
