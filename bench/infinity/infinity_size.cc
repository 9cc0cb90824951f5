// bench_infinity's sizing: see the header.
#include "bench/infinity/infinity_size.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/memory_budget.h"
#include "runtime/config/model_state_estimate.h"
#include "runtime/config/rank_peak_memory.h"

namespace ds::bench {
namespace {

constexpr int kHeadWidth = 128;
constexpr int kMaxHidden = 4096;
constexpr double kBlocksAimedAt = 16;
constexpr double kDiskKeptFree = 0.10;

double memTotalBytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    if (key == "MemTotal:" && meminfo >> kib) return kib * 1024.0;
    meminfo.ignore(1 << 16, '\n');
  }
  throw Error("/proc/meminfo: no MemTotal line; bench_infinity sizes its model from it");
}

int roundHidden(double wanted) {
  const int multiples = static_cast<int>(std::lround(wanted / kHeadWidth));
  return std::clamp(multiples * kHeadWidth, kHeadWidth, kMaxHidden);
}

double gptParameters(const runtime::GptConfig& c) {
  return runtime::gptModelShape(c, 1).parameters;
}

}  // namespace

MachineRoom machineRoom(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0)
    throw Error("--dir " + dir + ": " + std::strerror(errno) +
                "; give an existing directory for the swap files");
  MachineRoom room;
  room.ramBytes = memTotalBytes();
  room.freeDiskBytes = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  return room;
}

BytesPerParameter bytesPerParameter(const runtime::DeepSpeedConfig& config) {
  using namespace runtime;
  const DType model = config.precision.modelDtype;
  const double stateBytes =
      optimizerStateBytesPerParameter(config.optimizer.value_or(OptimizerConfig{}));
  const ModelStateEstimate e =
      estimateModelState(config.zero.stage, model, config.precision.gradAccumDtype.value_or(model),
                         1.0, 1, stateBytes);
  BytesPerParameter b;
  b.modelStates = e.total();
  if (config.zero.offloadParam.device == OffloadDevice::Nvme) b.swapFiles += dtypeBytes(model);
  if (config.zero.offloadOptimizer.device == OffloadDevice::Nvme)
    b.swapFiles += swapSlotBytesPerElement(e, stateBytes);
  return b;
}

runtime::GptConfig chooseGptShape(double params, int hidden, int layers, int seq) {
  runtime::GptConfig c;
  c.vocabSize = 257;
  c.seqLength = c.maxPositionEmbeddings = seq;
  if (hidden <= 0)
    hidden = roundHidden(std::sqrt(params / (12.0 * (layers > 0 ? layers : kBlocksAimedAt))));
  c.hiddenSize = hidden;
  c.numAttentionHeads = std::max(1, hidden / kHeadWidth);
  if (layers <= 0) {
    // Whole blocks on top of the embedding and head, rounded up: at least `params` in all.
    c.numLayers = 0;
    const double outside = gptParameters(c);
    c.numLayers = 1;
    const double block = gptParameters(c) - outside;
    layers = std::max(1, static_cast<int>(std::ceil((params - outside) / block)));
  }
  c.numLayers = layers;
  c.validate();
  return c;
}

void checkDiskRoom(double swapBytes, const MachineRoom& room, const std::string& dir) {
  const double usable = (1.0 - kDiskKeptFree) * room.freeDiskBytes;
  if (swapBytes > usable)
    throw Error("--dir " + dir + ": the swap files need " + humanBytes(swapBytes) + " but only " +
                humanBytes(usable) + " may be used there (90% of its " +
                humanBytes(room.freeDiskBytes) +
                " free); give --dir on a disk with more room, or fewer --params (or a smaller "
                "--ram-factor)");
}

}  // namespace ds::bench
