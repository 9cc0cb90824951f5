// Fuzz target: ds-launch's resource selection, the way main() runs it: --include and --exclude
// (DeepSpeed's NODE_SPEC grammar), --num_nodes, --num_gpus and CUDA_VISIBLE_DEVICES applied to a
// hostfile's pool. Input, one field a line:
//   INCLUDE \n EXCLUDE \n NUM_NODES NUM_GPUS HOSTFILE_FOUND VISIBLE_DEVICES \n HOSTFILE...
// A missing number is -1 (the flag not given); without a usable hostfile the pool is localhost's
// four slots, as on a machine with four GPUs and no hostfile.
#include <cstdlib>
#include <sstream>

#include "common/error.h"
#include "fuzz/fuzz_target.h"
#include "launcher/hostfile.h"
#include "launcher/resources.h"

namespace ds::fuzz {
namespace {

int readInt(std::istringstream& in) {
  std::string word;
  if (!(in >> word)) return -1;
  const long long value = std::strtoll(word.c_str(), nullptr, 10);
  return static_cast<int>(std::max<long long>(std::min<long long>(value, 1 << 30), -(1 << 30)));
}

void fuzzNodeSpec(std::string_view input) {
  const auto parts = splitInput(input, "\n", 4);
  const std::string include(parts[0]);
  const std::string exclude(parts.size() > 1 ? parts[1] : "");
  launcher::SelectionRequest request;
  request.include = include;
  request.exclude = exclude;
  std::istringstream numbers(std::string(parts.size() > 2 ? parts[2] : ""));
  request.numNodes = readInt(numbers);
  request.numGpus = readInt(numbers);
  request.hostfileFound = readInt(numbers) != 0;
  numbers >> request.visibleDevices;

  launcher::Resources pool = {{"localhost", {0, 1, 2, 3}}};
  if (parts.size() > 3 && request.hostfileFound) {
    try {
      pool = launcher::poolFromHostfile(launcher::parseHostfile(parts[3], "fuzz/hostfile"));
    } catch (const Error&) {
      request.hostfileFound = false;  // as ds-launch without a hostfile
    }
  }
  for (const std::string* spec : {&include, &exclude}) {
    if (spec->empty()) continue;
    try {
      (void)launcher::parseNodeSpecList(*spec, "--include");
    } catch (const Error&) {
    }
  }
  const launcher::Selection selection = launcher::selectResources(pool, request);
  DS_FUZZ_CHECK(!selection.resources.empty());
  for (const auto& node : selection.resources) DS_FUZZ_CHECK(!node.slots.empty());
  (void)launcher::describe(selection.resources);
}

}  // namespace

DS_FUZZ_TARGET(node_spec, fuzzNodeSpec);

}  // namespace ds::fuzz
