// fio's sequential bandwidth on a file (libaio, O_DIRECT), the baseline bench_aio, bench_offload
// and ds-nvme-tune print beside the offload I/O engine's own figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds {

// GB/s of one fio run writing or reading `bytes` of `file` in `blockBytes` requests with
// `queueDepth` in flight (a read needs the file to exist); 0 when fio is missing or fails.
double fioBandwidthGBps(const std::string& file, bool write, size_t blockBytes, int64_t queueDepth,
                        size_t bytes);

}  // namespace ds
