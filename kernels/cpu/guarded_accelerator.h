// A test backend of the accelerator interface: the CPU kernels, bit for bit, over "device memory"
// that host code cannot read. A GPU's memory is separate from the host's, but on the CPU backend it
// is not, so a model or engine that reads a device buffer on the host passes every CPU test and
// fails only on a real GPU. Here device memory lives in one reserved arena that is PROT_NONE except
// while a backend call runs, so such a read dies at once with SIGSEGV and a message naming it
// ("host code touched device memory"), and every device-pointer argument is checked to lie in a
// live allocation (a host pointer given as device memory, or a copy of the wrong CopyKind, is a
// ds::Error naming the call and the argument).
//
// Not for production: every call changes the arena's page protection (two mprotect calls when no
// other call is in flight, each costing about 35 ns a resident 4 KiB page), and fresh allocations
// are filled with NaN bytes (0xFF) to expose code that relies on zeroed memory, which cudaMalloc
// does not promise either.
#pragma once

#include "kernels/accelerator.h"

namespace ds::kernels {

// The one guarded backend of the process (its arena reserves 64 GiB of address space, no memory),
// created on first use. kind() is DeviceKind::Cpu and hostAccessible() is false.
Accelerator& guardedCpuAccelerator();

}  // namespace ds::kernels
