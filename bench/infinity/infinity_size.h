// How bench_infinity sizes its GPT: the machine's room (physical RAM, the swap directory's free
// disk), the bytes each parameter takes in memory-state terms and in the swap files for a config,
// and a GPT shape of about a target parameter count. Not here: training or timing the model.
#pragma once

#include <string>

#include "runtime/config/ds_config.h"
#include "runtime/model/gpt_config.h"

namespace ds::bench {

struct MachineRoom {
  double ramBytes = 0;       // MemTotal of /proc/meminfo
  double freeDiskBytes = 0;  // statvfs of the swap directory: blocks free to an unprivileged user
};

// Throws ds::Error naming --dir where the directory cannot be examined.
MachineRoom machineRoom(const std::string& dir);

// Per parameter, for `config` at world 1: the model states ZeRO counts (model_state_estimate.h:
// 16-bit parameters and gradients, fp32 master, the optimizer's state) and what both swap files
// hold (offload_param: the parameter in the model dtype; offload_optimizer: master and state).
struct BytesPerParameter {
  double modelStates = 0;
  double swapFiles = 0;
};
BytesPerParameter bytesPerParameter(const runtime::DeepSpeedConfig& config);

// A GPT with about `params` parameters (at least that many where only `params` is given): hidden
// a multiple of 128 near sqrt(params / (12 x 16)) (so about 16 blocks), up to 4096; heads of 128;
// layers as needed. A non-zero hidden or layers is taken as given; the other is derived. Vocabulary
// 257 (the ByteTokenizer's, padded to 384), learned positions over `seq`.
runtime::GptConfig chooseGptShape(double params, int hidden, int layers, int seq);

// Throws ds::Error naming --dir when `swapBytes` would leave less than 10% of the directory's free
// space.
void checkDiskRoom(double swapBytes, const MachineRoom& room, const std::string& dir);

}  // namespace ds::bench
