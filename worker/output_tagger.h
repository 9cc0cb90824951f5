// OutputTagger: once a worker knows its rank, everything written to its stdout and stderr (and by
// any program it starts) goes out as "[rank N] line" on the original stdout. ds-launch reads these
// tags to route lines to per-rank logs whatever the backend (a per-rank pipe, ssh, pdsh, mpirun
// or srun all merge many ranks into one stream).
#pragma once

#include <string>

namespace ds::worker {

// Starts tagging with `rank`. Not thread-safe with respect to itself; call once.
void startTaggingOutput(int rank);

// Writes `lastWords` (if any) to stderr, flushes stdio, closes the tagged descriptors and waits
// (bounded, also when nobody reads the console any more) until every pending line has been
// written. Safe to call when tagging never started, and more than once.
void finishTaggedOutput(const std::string& lastWords = "");

}  // namespace ds::worker
