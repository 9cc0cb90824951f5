// Megatron's tensor-parallel blocks on 1, 2 and 4 model ranks (threads over an in-process shared
// memory group, and the model groups of a model 2 x data 2 topology) against the unsliced
// one-rank computation: a column-parallel then row-parallel MLP (outputs and every gradient),
// the vocab-parallel embedding and the vocab-parallel cross-entropy (loss and logit gradients).
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <mutex>
#include <random>
#include <sstream>

#include "common/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/parallel/parallel_linear.h"
#include "runtime/parallel/tensor_slicing.h"
#include "runtime/parallel/topology_groups.h"
#include "runtime/parallel/vocab_parallel_cross_entropy.h"
#include "runtime/parallel/vocab_parallel_embedding.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::onThreads;
using ds::test::rankCheck;

namespace {

// Built out of line: GCC 12 warns (falsely) of an uninitialised string when the options are
// filled inside the rank lambda.
GroupOptions loopbackOptions(const std::string& prefix) {
  GroupOptions options;
  options.bindAddress = "127.0.0.1";
  options.storePrefix = prefix;
  options.timeout = std::chrono::seconds(20);
  return options;
}

std::vector<float> randomVector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> absolute(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

// One rank's tensors laid side by side: columns [begin, begin + local) of a [rows, width] matrix.
std::vector<float> columnsOf(const std::vector<float>& m, size_t rows, size_t width, size_t begin,
                             size_t local) {
  std::vector<float> out;
  for (size_t r = 0; r < rows; ++r)
    out.insert(out.end(), m.begin() + r * width + begin, m.begin() + r * width + begin + local);
  return out;
}

// Sliced and unsliced results differ only in the order their float sums are taken (chunks per
// rank, then the all-reduce; the BLAS may block differently for narrower matrices). Each is
// within gamma_n * (the same computation on absolute values) of the exact value, n the longest
// chain of roundings (gamma_n ~ n * FLT_EPSILON / 2), so they differ by at most
// n * FLT_EPSILON * that. This bound is what an equality of sums can promise in fp32; a wrong
// slice, a missing or doubled all-reduce or bias misses it by orders of magnitude.
void requireClose(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& absWant, size_t chain, const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = chain * double(FLT_EPSILON) * absWant[i];
    if (std::fabs(double(got[i]) - double(want[i])) > bound) {
      INFO(what << "[" << i << "]: got " << got[i] << ", want " << want[i] << ", bound " << bound);
      REQUIRE(false);
    }
  }
}

struct MlpTensors {
  std::vector<float> x, w1, b1, w2, b2, dy;  // inputs: [N, h], [ff, h], [ff], [h, ff], [h], [N, h]
};
struct MlpResults {
  std::vector<float> y1, y2, dw1, db1, dw2, db2, dy1, dx;
};

constexpr size_t kRows = 6, kHidden = 8, kFfn = 16;

MlpTensors randomMlp() {
  return {randomVector(kRows * kHidden, 1),
          randomVector(kFfn * kHidden, 2),
          randomVector(kFfn, 3),
          randomVector(kHidden * kFfn, 4),
          randomVector(kHidden, 5),
          randomVector(kRows * kHidden, 6)};
}

// The one-rank MLP (no activation: the blocks are linear; the GPT puts its activation between).
MlpResults unslicedMlp(const MlpTensors& t) {
  using kernels::matmul;
  const size_t N = kRows, h = kHidden, ff = kFfn;
  MlpResults r{std::vector<float>(N * ff), std::vector<float>(N * h),  std::vector<float>(ff * h),
               std::vector<float>(ff),     std::vector<float>(h * ff), std::vector<float>(h),
               std::vector<float>(N * ff), std::vector<float>(N * h)};
  matmul(false, true, N, ff, h, 1.0f, t.x.data(), h, t.w1.data(), h, 0.0f, r.y1.data(), ff);
  for (size_t i = 0; i < N; ++i)
    for (size_t o = 0; o < ff; ++o) r.y1[i * ff + o] += t.b1[o];
  matmul(false, true, N, h, ff, 1.0f, r.y1.data(), ff, t.w2.data(), ff, 0.0f, r.y2.data(), h);
  for (size_t i = 0; i < N; ++i)
    for (size_t o = 0; o < h; ++o) r.y2[i * h + o] += t.b2[o];
  matmul(true, false, h, ff, N, 1.0f, t.dy.data(), h, r.y1.data(), ff, 0.0f, r.dw2.data(), ff);
  for (size_t i = 0; i < N; ++i)
    for (size_t o = 0; o < h; ++o) r.db2[o] += t.dy[i * h + o];
  matmul(false, false, N, ff, h, 1.0f, t.dy.data(), h, t.w2.data(), ff, 0.0f, r.dy1.data(), ff);
  matmul(true, false, ff, h, N, 1.0f, r.dy1.data(), ff, t.x.data(), h, 0.0f, r.dw1.data(), h);
  for (size_t i = 0; i < N; ++i)
    for (size_t o = 0; o < ff; ++o) r.db1[o] += r.dy1[i * ff + o];
  matmul(false, false, N, h, ff, 1.0f, r.dy1.data(), ff, t.w1.data(), h, 0.0f, r.dx.data(), h);
  return r;
}

// One model rank's MLP: column-parallel fc1 (its ff chunk), row-parallel fc2.
MlpResults slicedMlp(Communicator& model, const MlpTensors& t) {
  const int rank = model.rank(), size = model.size();
  const size_t N = kRows, h = kHidden, ffLocal = kFfn / size;
  const auto w1 = columnParallelWeight(t.w1.data(), kFfn, h, rank, size);
  const auto b1 = columnParallelBias(t.b1.data(), kFfn, rank, size);
  const auto w2 = rowParallelWeight(t.w2.data(), h, kFfn, rank, size);
  MlpResults r{std::vector<float>(N * ffLocal), std::vector<float>(N * h),
               std::vector<float>(ffLocal * h), std::vector<float>(ffLocal),
               std::vector<float>(h * ffLocal), std::vector<float>(h),
               std::vector<float>(N * ffLocal), std::vector<float>(N * h)};
  const LinearShape fc1{N, h, ffLocal}, fc2{N, ffLocal, h};
  kernels::Accelerator& acc = kernels::accelerator(DeviceKind::Cpu);
  columnParallelForward(acc, fc1, t.x.data(), w1.data(), b1.data(), r.y1.data());
  rowParallelForward(acc, model, fc2, r.y1.data(), w2.data(), t.b2.data(), r.y2.data());
  rowParallelBackward(acc, fc2, r.y1.data(), w2.data(), t.dy.data(), r.dw2.data(), r.db2.data(),
                      r.dy1.data());
  columnParallelBackward(acc, model, fc1, t.x.data(), w1.data(), r.dy1.data(), r.dw1.data(),
                         r.db1.data(), r.dx.data());
  return r;
}

// Every output and gradient of `got` (model rank `rank` of `size`) against its share of the
// unsliced results.
void requireMlpMatches(const MlpResults& got, int rank, int size, const MlpTensors& t) {
  const MlpResults want = unslicedMlp(t);
  const MlpResults bound = unslicedMlp({absolute(t.x), absolute(t.w1), absolute(t.b1),
                                        absolute(t.w2), absolute(t.b2), absolute(t.dy)});
  // The longest chain: dx sums over ff of dy1, itself a sum over h (plus the rows for dW).
  const size_t chain = kRows + kHidden + kFfn + 4;
  const size_t local = kFfn / size, begin = rank * local;
  auto cols = [&](const std::vector<float>& m) { return columnsOf(m, kRows, kFfn, begin, local); };
  auto rowsOf = [&](const std::vector<float>& m) {
    return columnParallelWeight(m.data(), kFfn, kHidden, rank, size);
  };
  auto biasOf = [&](const std::vector<float>& m) {
    return columnParallelBias(m.data(), kFfn, rank, size);
  };
  auto w2Of = [&](const std::vector<float>& m) {
    return rowParallelWeight(m.data(), kHidden, kFfn, rank, size);
  };
  requireClose(got.y1, cols(want.y1), cols(bound.y1), chain, "fc1 output");
  requireClose(got.y2, want.y2, bound.y2, chain, "fc2 output (all-reduced, bias once)");
  requireClose(got.dw2, w2Of(want.dw2), w2Of(bound.dw2), chain, "fc2 weight gradient");
  requireClose(got.db2, want.db2, bound.db2, chain, "fc2 bias gradient");
  requireClose(got.dy1, cols(want.dy1), cols(bound.dy1), chain, "fc2 input gradient");
  requireClose(got.dw1, rowsOf(want.dw1), rowsOf(bound.dw1), chain, "fc1 weight gradient");
  requireClose(got.db1, biasOf(want.db1), biasOf(bound.db1), chain, "fc1 bias gradient");
  requireClose(got.dx, want.dx, bound.dx, chain, "fc1 input gradient (all-reduced)");
}

std::vector<ShmCommunicator> modelGroup(int size) {
  ShmOptions options;
  options.chunkBytes = 4096;
  options.timeout = std::chrono::seconds(20);
  return ShmCommunicator::inProcessGroup(size, options);
}

}  // namespace

TEST_CASE("tensor parallel: column- then row-parallel MLP equals the unsliced one",
          "[tensor_parallel][linear]") {
  const int size = GENERATE(1, 2, 4);
  const MlpTensors t = randomMlp();
  auto group = modelGroup(size);
  std::vector<MlpResults> got(size);
  onThreads(size, [&](int r) { got[r] = slicedMlp(group[r], t); });
  for (int r = 0; r < size; ++r) {
    INFO("model rank " << r << " of " << size);
    requireMlpMatches(got[r], r, size, t);
  }
}

TEST_CASE("tensor parallel: the MLP over the model groups of a model 2 x data 2 topology",
          "[tensor_parallel][linear]") {
  // Each data-parallel replica runs its own input through its model group; a slip onto the data
  // group would mix the two replicas' partial sums.
  const PipeModelDataTopology topology(/*pipe=*/1, /*model=*/2, /*data=*/2);
  MemoryStore store;
  std::vector<MlpResults> got(4);
  std::vector<MlpTensors> inputs(4);
  std::vector<int> modelRank(4);
  onThreads(4, [&](int r) {
    GroupFactory factory(store, {r, {4}}, loopbackOptions("tp"));
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    MlpTensors t = randomMlp();
    t.x = randomVector(kRows * kHidden, 100 + topology.getCoord(r, "data"));
    inputs[r] = t;
    modelRank[r] = groups.model->rank();
    got[r] = slicedMlp(*groups.model, t);
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(modelRank[r] == topology.getCoord(r, "model"));
    requireMlpMatches(got[r], modelRank[r], 2, inputs[r]);
  }
}

TEST_CASE("tensor parallel: vocab-parallel embedding equals the full lookup bit for bit",
          "[tensor_parallel][embedding]") {
  const int size = GENERATE(1, 2, 4);
  const size_t vocab = 16, dim = 5, rows = 9;
  const std::vector<int32_t> ids = {0, 15, 3, 8, 3, 12, 7, 4, 11};  // every rank's range, a repeat
  const auto table = randomVector(vocab * dim, 7);
  const auto dout = randomVector(rows * dim, 8);
  const auto& k = kernels::transformerKernels();
  std::vector<float> want(rows * dim), wantGrad(vocab * dim, 0.0f);
  k.embeddingForward(want.data(), ids.data(), table.data(), nullptr, rows, rows, dim);
  k.embeddingBackward(wantGrad.data(), nullptr, ids.data(), dout.data(), rows, rows, dim);

  auto group = modelGroup(size);
  std::vector<std::vector<float>> out(size), grad(size);
  onThreads(size, [&](int r) {
    const VocabSlice slice = vocabSlice(vocab, r, size);
    const auto mine = columnParallelWeight(table.data(), vocab, dim, r, size);
    out[r].resize(rows * dim);
    vocabParallelEmbeddingForward(group[r], slice, mine.data(), ids.data(), rows, dim,
                                  out[r].data());
    grad[r].assign(slice.rows.count * dim, 0.0f);
    vocabParallelEmbeddingBackward(slice, ids.data(), rows, dim, dout.data(), grad[r].data());
  });
  // Exact: the all-reduce adds zeros to the one owner's row, and each rank accumulates its rows'
  // gradients in the same order the full backward does.
  std::vector<float> joined;
  for (int r = 0; r < size; ++r) {
    INFO("model rank " << r << " of " << size);
    REQUIRE(out[r] == want);
    joined.insert(joined.end(), grad[r].begin(), grad[r].end());
  }
  REQUIRE(joined == wantGrad);
}

TEST_CASE("tensor parallel: an id outside the vocabulary is refused",
          "[tensor_parallel][embedding]") {
  auto group = modelGroup(1);
  const std::vector<float> table(4 * 2, 1.0f);
  std::vector<float> out(2);
  const int32_t id = 4;
  REQUIRE_THROWS_WITH(vocabParallelEmbeddingForward(group[0], vocabSlice(4, 0, 1), table.data(),
                                                    &id, 1, 2, out.data()),
                      Catch::Contains("token id 4 at row 0 is outside the vocabulary of 4"));
}

TEST_CASE("tensor parallel: vocab-parallel cross-entropy equals the full one without gathering",
          "[tensor_parallel][cross_entropy]") {
  const int size = GENERATE(1, 2, 4);
  const size_t vocab = 48, rows = 7;
  const float gradScale = 0.25f;
  // Targets in every rank's range, and two masked rows (NeoX's -100).
  const std::vector<int32_t> targets = {0, 47, 13, -100, 30, 24, -1};
  auto logits = randomVector(rows * vocab, 9);
  for (float& z : logits) z *= 8.0f;  // spread, so that the shift by the row maximum matters
  auto want = logits;
  const double wantLoss = kernels::transformerKernels().crossEntropy(want.data(), targets.data(),
                                                                     rows, vocab, gradScale);

  auto group = modelGroup(size);
  std::vector<double> loss(size);
  std::vector<std::vector<float>> grad(size);
  onThreads(size, [&](int r) {
    const VocabSlice slice = vocabSlice(vocab, r, size);
    grad[r] = columnsOf(logits, rows, vocab, slice.rows.begin, slice.rows.count);
    loss[r] =
        vocabParallelCrossEntropy(group[r], slice, grad[r].data(), targets.data(), rows, gradScale);
  });
  // Both sides exponentiate in fp32 (the kernel's exp is within 2 ulp of std::exp) and sum V
  // terms in different orders, so probabilities agree to about (V + 4) * FLT_EPSILON relative:
  // 6e-6 here. The loss sums log(sum) - picked over 5 rows of magnitude ~10: 1e-4 absolute
  // covers it; a gradient entry is p * gradScale: 1e-5 * gradScale absolute.
  for (int r = 0; r < size; ++r) {
    INFO("model rank " << r << " of " << size);
    REQUIRE(loss[r] == loss[0]);  // the same on every model rank
    REQUIRE(std::fabs(loss[r] - wantLoss) < 1e-4);
    const size_t local = vocab / size;
    const auto wantCols = columnsOf(want, rows, vocab, r * local, local);
    for (size_t i = 0; i < wantCols.size(); ++i) {
      INFO("gradient [" << i / local << ", " << r * local + i % local << "]");
      REQUIRE(std::fabs(grad[r][i] - wantCols[i]) <= 1e-5f * gradScale);
      if (targets[i / local] < 0) REQUIRE(grad[r][i] == 0.0f);
    }
  }
  REQUIRE(wantLoss > 1.0);  // the comparison is not of two zeros
}
