// usableCores: the CPUs this process may run on, which is what a thread count should divide:
// taskset, numactl, Slurm's and containers' cpusets narrow the affinity mask, while
// std::thread::hardware_concurrency() still counts every CPU of the machine.
#pragma once

namespace ds {

// The affinity mask's CPU count (the machine's when the mask cannot be read), at least 1.
int usableCores();

}  // namespace ds
