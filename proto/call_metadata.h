// Metadata the coordinator reads from a call before it creates any state for it: a NodeSession
// stream's job token travels here (as well as in its first message, which carries the epoch), so
// a client without the token is refused before a stream object exists.
#pragma once

namespace ds::proto {

// gRPC metadata keys are lower case.
inline constexpr char kJobTokenMetadata[] = "ds-job-token";

}  // namespace ds::proto
