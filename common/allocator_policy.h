// keepFreedMemoryForReuse: glibc's malloc hands every block at or above its mmap threshold (at
// most 32 MiB by default) straight back to the OS when it is freed, so the next allocation of the
// same size faults each page in again and the kernel zeroes it. Training frees and re-allocates
// the same large buffers every step (stage 3's gathered layers and their staging, activations,
// gradient scratch). A fault costs ~0.3 us per 4 KiB on bare metal, but ~15 us in a guest whose
// hypervisor shadows the page tables (PVM, the machines here): 150 MB then take 0.6 s to touch.
// Raising the mmap and trim thresholds to 1 GiB keeps freed blocks in the heap for the next
// allocation, as a caching allocator does. The process's peak memory is unchanged (the blocks
// were live before); what changes is that it is not returned between steps.
// Process-wide; the engine and the coordinator call it (once is enough).
#pragma once

namespace ds {

void keepFreedMemoryForReuse();

}  // namespace ds
