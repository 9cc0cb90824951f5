// Where one rank of a job runs: the launcher's plan entry for it and what the rank learns about
// itself when it joins. Who else shares its node (slot ids, sizes) is the join reply's, not this.
#pragma once

#include <string>

namespace ds {

struct RankPlacement {
  int rank = 0;
  std::string host;   // the host in the plan (the address Gloo binds to there)
  int slot = 0;       // slot (device) id on the host, from the hostfile's slot numbering
  int localRank = 0;  // LOCAL_RANK: the index on the node
  int localSize = 0;
  int nodeRank = 0;   // CROSS_RANK: the host's index in the plan
  int nodeCount = 1;  // CROSS_SIZE
  int worldSize = 1;
};

}  // namespace ds
