// The axes of a pipe x data x model grid other than the data axis the engine partitions over:
// what the engine needs to agree on one step across every rank that holds a part of the same
// model (the global gradient norm, fp16 overflow). Null where that axis has size 1.
#pragma once

#include "runtime/comm/communicator.h"

namespace ds::runtime {

struct ParallelGroups {
  Communicator* model = nullptr;  // this rank's tensor-slicing group
  Communicator* pipe = nullptr;   // every stage of this rank's pipeline
};

}  // namespace ds::runtime
