// prepareGrpcProcess: process-wide gRPC settings for ds-launch's coordinator and ds-worker's
// client, applied once before the first channel or server.
//   - gRPC's own internal logging goes nowhere (a failed bind prints a page of JSON; our callers
//     report failures themselves). DS_GRPC_LOG=1 keeps it, for debugging.
//   - Abseil's mutex deadlock detection is off. Debian builds Abseil without NDEBUG, so every
//     absl::Mutex inside gRPC records lock-order edges in a global graph: measured at 12% of all
//     CPU of a 2048-rank control plane (bench_control_plane).
#pragma once

namespace ds {

void prepareGrpcProcess();

}  // namespace ds
