// OptimizerStateHome (runtime/zero/optimizer_state_home.h), the stage's home of the optimizer's
// sub-groups, without an engine: the resident home leaves master and state where they are; the
// nvme home binds each group's state to a slot for the update and returns the master slice there,
// keeps what the update wrote across steps and checkpoints, and sizes the memory check by slots.
#include <catch2/catch.hpp>
#include <filesystem>

#include "common/aligned_vector.h"
#include "runtime/optim/make_optimizer.h"
#include "runtime/zero/optimizer_state_home.h"
#include "test/libaio_dir.h"

using namespace ds::runtime;

namespace {

constexpr size_t kGroupElements[] = {3000, 1700};  // a page and more each: some pages given back

struct Groups {
  ds::AlignedVector<float> master;
  std::vector<std::unique_ptr<Optimizer>> optimizers;
  std::vector<std::vector<float>> initialStates;  // per group, its arrays back to back

  Groups() {
    const size_t total = kGroupElements[0] + kGroupElements[1];
    master.resize(total);
    for (size_t i = 0; i < total; ++i) master[i] = 0.25f * static_cast<float>(i);
    std::vector<ParamSpec> specs = {{"a", {3000}, true, 0, 3000, 0},
                                    {"b", {1700}, true, 3000, 1700, 1}};
    for (size_t g = 0, begin = 0; g < 2; begin += kGroupElements[g++]) {
      optimizers.push_back(
          makeOptimizer(OptimizerConfig{}, {specs[g]}, begin, begin + kGroupElements[g]));
      std::vector<float> values;
      for (const OptimizerStateArray& a : optimizers.back()->stateArrays())
        for (size_t e = 0; e < a.count; ++e) values.push_back(a.data[e] = float(g + e) + 0.5f);
      initialStates.push_back(values);
    }
  }
  float* slice(size_t g) { return master.data() + (g == 0 ? 0 : kGroupElements[0]); }
  size_t regions() const { return 1 + optimizers.front()->stateArrays().size(); }
};

DeepSpeedConfig offloadConfig(OffloadDevice device, const std::string& dir) {
  DeepSpeedConfig config;
  config.zero.offloadOptimizer.device = device;
  config.zero.offloadOptimizer.nvmePath = dir;
  config.zero.offloadOptimizer.bufferCount = 4;
  return config;
}

// Number of elements of group g's arrays (master, then states) that differ from the start plus
// `delta`.
size_t wrongValues(const Groups& groups, size_t g, const float* master,
                   const std::vector<OptimizerStateArray>& states, float delta) {
  size_t wrong = 0, at = 0;
  const size_t base = g == 0 ? 0 : kGroupElements[0];
  for (size_t e = 0; e < kGroupElements[g]; ++e)
    wrong += master[e] != 0.25f * static_cast<float>(base + e) + delta;
  for (const OptimizerStateArray& a : states)
    for (size_t e = 0; e < a.count; ++e)
      wrong += a.data[e] != groups.initialStates[g][at++] + delta;
  return wrong;
}

}  // namespace

TEST_CASE("OptimizerStateHome: resident leaves master and state in place", "[offload]") {
  for (OffloadDevice device : {OffloadDevice::None, OffloadDevice::Cpu}) {
    Groups groups;
    auto home = OptimizerStateHome::make(offloadConfig(device, ""), 0);
    home->reserve({kGroupElements[0], kGroupElements[1]}, groups.regions());
    for (size_t g = 0; g < 2; ++g)
      home->addGroup(groups.slice(g), kGroupElements[g], *groups.optimizers[g]);
    CHECK_FALSE(home->streamsMaster());
    for (size_t g = 0; g < 2; ++g) {
      const float* own = groups.optimizers[g]->stateArrays().front().data;
      CHECK(home->acquire(g, groups.slice(g), *groups.optimizers[g]) == groups.slice(g));
      CHECK(groups.optimizers[g]->stateArrays().front().data == own);
      CHECK(wrongValues(groups, g, groups.slice(g), groups.optimizers[g]->stateArrays(), 0) == 0);
      home->release(g, *groups.optimizers[g]);
    }
    home->endStep();
    CHECK(home->fileBytes() == 0);
    CHECK(home->engineName().empty());
    CHECK(home->traffic().read + home->traffic().written == 0);
    ModelStateEstimate e;
    e.masterWeights = 100;
    e.optimizerStates = 200;
    const StateFootprint f = home->footprint(e, 8, 2, 3000);
    CHECK(f.bytes == 300);
    CHECK(f.where.empty());
    CHECK(f.advice.find("offload_optimizer") != std::string::npos);
  }
}

TEST_CASE(
    "OptimizerStateHome: nvme streams each group through a slot and keeps its updates "
    "across steps and checkpoints",
    "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("state-home");
  if (dir.empty()) return;
  Groups groups;
  auto home = OptimizerStateHome::make(offloadConfig(OffloadDevice::Nvme, dir), 0);
  CHECK(home->streamsMaster());
  home->reserve({kGroupElements[0], kGroupElements[1]}, groups.regions());
  for (size_t g = 0; g < 2; ++g)
    home->addGroup(groups.slice(g), kGroupElements[g], *groups.optimizers[g]);
  CHECK(home->fileBytes() > 0);
  CHECK(home->engineName() == ds::test::kLibaioEngineName);
  CHECK(groups.master[1024] == 0.0f);  // the home's pages were given back

  // Two steps: each group's master and state where the home put them, updated there (+1 each).
  for (int step = 0; step < 2; ++step) {
    for (size_t g = 0; g < 2; ++g) {
      Optimizer& optimizer = *groups.optimizers[g];
      const float* own = optimizer.stateArrays().front().data;
      float* master = home->acquire(g, groups.slice(g), optimizer);
      CHECK(master != groups.slice(g));
      const std::vector<OptimizerStateArray> bound = optimizer.stateArrays();
      CHECK(bound.front().data != own);
      CHECK(wrongValues(groups, g, master, bound, float(step)) == 0);
      for (size_t e = 0; e < kGroupElements[g]; ++e) master[e] += 1.0f;
      for (const OptimizerStateArray& a : bound)
        for (size_t e = 0; e < a.count; ++e) a.data[e] += 1.0f;
      home->release(g, optimizer);
      CHECK(optimizer.stateArrays().front().data == own);  // unbound again
    }
    home->endStep();
  }
  CHECK(home->traffic().written > 0);

  // A checkpoint: the updates are in the homes while it runs.
  home->swapInAll();
  for (size_t g = 0; g < 2; ++g)
    CHECK(wrongValues(groups, g, groups.slice(g), groups.optimizers[g]->stateArrays(), 2) == 0);
  home->swapOutAll();
  float* master = home->acquire(1, groups.slice(1), *groups.optimizers[1]);
  CHECK(wrongValues(groups, 1, master, groups.optimizers[1]->stateArrays(), 2) == 0);
  home->release(1, *groups.optimizers[1]);
  home->endStep();

  // The memory check counts buffer_count slots, or one per group if fewer, of the largest group.
  ModelStateEstimate e;
  e.masterWeights = 1;  // a master of its own: 4 bytes per element in the slot
  const StateFootprint f = home->footprint(e, 8, 2, 3000);
  CHECK(f.bytes == 2.0 * 3000 * (4 + 8));
  CHECK(f.where.find("swap slots") != std::string::npos);
  CHECK(f.advice.find("buffer_count") != std::string::npos);
}

TEST_CASE("OptimizerStateHome: nvme without a master of its own leaves the master in place",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("state-home-fp32");
  if (dir.empty()) return;
  Groups groups;
  auto home = OptimizerStateHome::make(offloadConfig(OffloadDevice::Nvme, dir), 0);
  home->reserve({kGroupElements[0], kGroupElements[1]}, groups.regions() - 1);
  for (size_t g = 0; g < 2; ++g) home->addGroup(nullptr, kGroupElements[g], *groups.optimizers[g]);
  CHECK(groups.master[1024] == 256.0f);  // not given back: not the home's
  for (size_t g = 0; g < 2; ++g) {
    CHECK(home->acquire(g, groups.slice(g), *groups.optimizers[g]) == groups.slice(g));
    CHECK(wrongValues(groups, g, groups.slice(g), groups.optimizers[g]->stateArrays(), 0) == 0);
    home->release(g, *groups.optimizers[g]);
  }
  home->endStep();
}
