// shardSegments / mergeByDecay: see the header.
#include "runtime/optim/shard_segments.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ds::runtime {

std::vector<ShardSegment> shardSegments(const std::vector<ParamSpec>& specs, size_t begin,
                                        size_t end) {
  if (begin > end) {
    throw Error("optimizer shard: range begin " + std::to_string(begin) + " is past its end " +
                std::to_string(end) + "; pass [begin, end) with begin <= end");
  }
  std::vector<ShardSegment> out;
  for (size_t t = 0; t < specs.size(); ++t) {
    const ParamSpec& spec = specs[t];
    const size_t lo = std::max(begin, spec.offset), hi = std::min(end, spec.offset + spec.numel);
    if (lo < hi) out.push_back({lo - begin, hi - begin, t, spec.weightDecay});
  }
  return out;
}

std::vector<ShardSegment> mergeByDecay(const std::vector<ShardSegment>& segments) {
  std::vector<ShardSegment> out;
  for (const ShardSegment& s : segments) {
    if (!out.empty() && out.back().end == s.begin && out.back().decay == s.decay) {
      out.back().end = s.end;
    } else {
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace ds::runtime
