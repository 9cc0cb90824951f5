// Which parts of a parameter table fall inside one optimizer's range [begin, end) of the flat
// buffer: the pieces of each tensor this shard updates, with the tensor's index and decay flag.
// Shared by every optimizer so they agree on what a shard is.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/model/model.h"

namespace ds::runtime {

struct ShardSegment {
  size_t begin = 0, end = 0;  // relative to the range start
  size_t tensor = 0;          // index into the spec table
  bool decay = false;
};

// One segment per spec overlapping [begin, end), in table order. Elements of the range that no
// spec covers are left out (the optimizer never touches them). Throws ds::Error if begin > end.
std::vector<ShardSegment> shardSegments(const std::vector<ParamSpec>& specs, size_t begin,
                                        size_t end);

// Adjacent segments with the same decay flag joined into one run, so element loops make few
// long calls instead of one per tensor.
std::vector<ShardSegment> mergeByDecay(const std::vector<ShardSegment>& segments);

}  // namespace ds::runtime
