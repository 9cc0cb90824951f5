// Fuzz target: a DeepSpeed hostfile as ds-launch reads it (parseHostfile, the bytes of
// --hostfile), then the pool built from it. What the parser promises about the hosts it accepts
// (usable names, each once, at most kMaxTotalSlots ranks) is checked on every accepted file.
#include <set>

#include "fuzz/fuzz_target.h"
#include "launcher/hostfile.h"
#include "launcher/resources.h"

namespace ds::fuzz {
namespace {

void fuzzHostfile(std::string_view input) {
  std::vector<std::string> warnings;
  const auto hosts = launcher::parseHostfile(input, "fuzz/hostfile", &warnings);
  DS_FUZZ_CHECK(!hosts.empty());
  std::set<std::string> names;
  int64_t slots = 0;
  for (const auto& entry : hosts) {
    DS_FUZZ_CHECK(launcher::hostNameProblem(entry.host).empty());
    DS_FUZZ_CHECK(names.insert(entry.host).second);
    DS_FUZZ_CHECK(entry.slots >= 0);
    slots += entry.slots;
  }
  DS_FUZZ_CHECK(slots <= launcher::kMaxTotalSlots);
  const launcher::Resources pool = launcher::poolFromHostfile(hosts);
  DS_FUZZ_CHECK(pool.size() == hosts.size());
  (void)launcher::describe(pool);
}

}  // namespace

DS_FUZZ_TARGET(hostfile, fuzzHostfile);

}  // namespace ds::fuzz
