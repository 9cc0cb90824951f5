// NCCL in non-blocking mode (ncclConfig_t.blocking = 0), so that initialisation and every op can
// be abandoned at the deadline instead of hanging in NCCL.
#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "common/error.h"
#include "runtime/comm/check_in.h"

namespace ds::runtime {
namespace {

constexpr std::chrono::milliseconds kCheckInGrace{3000};

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  return ncclSum;
}

void checkCuda(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw Error(what + ": " + cudaGetErrorString(error));
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;  // one float on the device, for barrier
};

NcclCommunicator::NcclCommunicator(Store& store, int rank, int size, const NcclOptions& options)
    : store_(store),
      prefix_(options.storePrefix),
      rank_(rank),
      size_(size),
      timeout_(options.timeout),
      state_(std::make_unique<State>()) {
  const std::string where = "nccl rank " + std::to_string(rank);
  checkCuda(cudaSetDevice(options.device), where + ": device " + std::to_string(options.device));
  checkCuda(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), where + ": stream");
  checkCuda(cudaMalloc(&state_->scratch, sizeof(float)), where + ": scratch");

  ncclUniqueId id;
  const std::string key = prefix_ + "/nccl/unique-id";
  if (rank == 0) {
    if (const ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess)
      throw Error(where + ": ncclGetUniqueId: " + ncclGetErrorString(result));
    store.set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
  } else {
    const std::string bytes = store.get(key, timeout_);
    if (bytes.size() != sizeof(id))
      throw Error(where + ": the NCCL unique id in the store has " + std::to_string(bytes.size()) +
                  " bytes, expected " + std::to_string(sizeof(id)));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&state_->comm, size, id, rank, &config);
  if (started != ncclSuccess && started != ncclInProgress)
    throw Error(where + ": ncclCommInitRankConfig: " + ncclGetErrorString(started));
  finish("init", ncclSuccess);
}

NcclCommunicator::~NcclCommunicator() {
  if (state_->comm != nullptr) ncclCommDestroy(state_->comm);
  if (state_->scratch != nullptr) cudaFree(state_->scratch);
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
}

void NcclCommunicator::finish(const char* op, int issued) {
  if (state_->comm == nullptr)
    throw Error("nccl " + std::string(op) + " on rank " + std::to_string(rank_) +
                ": the communicator was aborted by an earlier failure; make a new one");
  const uint64_t number = ops_++;
  std::string cause;
  if (issued != ncclSuccess && issued != ncclInProgress) {
    cause = ncclGetErrorString(static_cast<ncclResult_t>(issued));
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(state_->comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        cause = ncclGetErrorString(async);
        break;
      }
      if (async == ncclSuccess) {
        const cudaError_t done = cudaStreamQuery(state_->stream);
        if (done == cudaSuccess) return;
        if (done != cudaErrorNotReady) {
          cause = cudaGetErrorString(done);
          break;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        cause = "not finished within " + std::to_string(timeout_.count()) + " ms";
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  ncclCommAbort(state_->comm);  // NCCL cannot resume after this: the communicator is done
  state_->comm = nullptr;
  throw collectiveFailure(store_, prefix_, number, rank_, size_, std::min(kCheckInGrace, timeout_),
                          "nccl " + std::string(op), cause);
}

void NcclCommunicator::copyLocal(void* to, const void* from, size_t bytes) {
  checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, state_->stream),
            "nccl rank " + std::to_string(rank_) + ": copy");
  checkCuda(cudaStreamSynchronize(state_->stream), "nccl rank " + std::to_string(rank_));
}

void NcclCommunicator::doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) {
  finish("all_reduce", ncclAllReduce(data, data, count, ncclType(dtype), ncclOp(op), state_->comm,
                                     state_->stream));
}

void NcclCommunicator::doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) {
  finish("all_gather",
         ncclAllGather(in, out, countPerRank, ncclType(dtype), state_->comm, state_->stream));
}

void NcclCommunicator::doReduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                                       ReduceOp op) {
  finish("reduce_scatter", ncclReduceScatter(in, out, countPerRank, ncclType(dtype), ncclOp(op),
                                             state_->comm, state_->stream));
}

void NcclCommunicator::doBroadcast(void* data, size_t count, DType dtype, int root) {
  finish("broadcast",
         ncclBroadcast(data, data, count, ncclType(dtype), root, state_->comm, state_->stream));
}

// NCCL matches sends and receives by order per pair, as our contract says; it cannot check the
// counts (a mismatch is undefined in NCCL), so they are the caller's to keep equal.
void NcclCommunicator::doSend(const void* data, size_t count, DType dtype, int peer) {
  finish("send", ncclSend(data, count, ncclType(dtype), peer, state_->comm, state_->stream));
}

void NcclCommunicator::doRecv(void* data, size_t count, DType dtype, int peer) {
  finish("recv", ncclRecv(data, count, ncclType(dtype), peer, state_->comm, state_->stream));
}

void NcclCommunicator::doBarrier() {
  finish("barrier", ncclAllReduce(state_->scratch, state_->scratch, 1, ncclFloat32, ncclSum,
                                  state_->comm, state_->stream));
}

}  // namespace ds::runtime
