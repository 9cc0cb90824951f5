// The CPU backend of the accelerator interface: today's kernels called as they are (matmul,
// the widest transformer-kernel path, CPU-Adam), so a job on it computes bit for bit what the
// direct calls do. Everything runs at the call: streams order nothing and events only time.
#pragma once

#include "kernels/accelerator.h"

namespace ds::kernels {

Accelerator& cpuAccelerator();

}  // namespace ds::kernels
