#include "runtime/model/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "common/error.h"
#include "kernels/cpu/kernel_timers.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel_for.h"
#include "runtime/model/gpt_block.h"
#include "runtime/model/row_kernels.h"

namespace ds::runtime::gpt {
namespace {

using kernels::KernelFamily;
using kernels::KernelTimer;

// DeepSpeed's multiplicative_jitter: U(1 - 1e-2, 1 + 1e-2); NeoX's topk router: moe-jitter-eps.
double jitterEps(const MoeConfig& m) {
  if (m.kind == MoeKind::DeepSpeed) return m.noisyGate == NoisyGate::Jitter ? 1e-2 : 0.0;
  return m.router == MoeRouter::TopK ? m.jitterEps : 0.0;
}

float jitterFactor(const moe::RoutingNoise& noise, double eps, size_t t, size_t i, size_t h) {
  const double u = noise.uniform(t, moe::RoutingNoise::kJitter, i, h);
  return static_cast<float>(1.0 - eps + 2.0 * eps * u);
}

}  // namespace

size_t MoeActivations::bytes() const {
  size_t n = 0;
  for (const auto* v : {&jitter, &fc1, &act, &out, &mlpFc1, &mlpAct, &moeOut, &mlpOut, &coef})
    n += v->capacity();
  n += routing.probs.capacity() + routing.weight.capacity() + routing.rawGate.capacity() +
       exchange.expertIn.capacity();
  return n * sizeof(float) + (order.capacity() + slot.capacity()) * 4;
}

MoeLayer::MoeLayer(const GptConfig& c, kernels::Accelerator& acc, MoeSplit split)
    : c_(c),
      acc_(acc),
      k_(acc.transformerKernels()),
      h_(static_cast<size_t>(c.hiddenSize)),
      experts_(static_cast<size_t>(c.moe.numExperts)),
      xff_(static_cast<size_t>(c.expertFfnSize())),
      xff1_(static_cast<size_t>(c.expertFfnInputSize())),
      split_(split) {}

size_t MoeLayer::residualFfn() const {
  return split_.model ? split_.ffn : static_cast<size_t>(c_.ffnSize());
}

MlpTensors<const float> MoeLayer::residualShare(MlpTensors<const float> mlp) const {
  if (split_.model && split_.model->rank() != 0) mlp.fc2b = nullptr;  // added once in the sum
  return mlp;
}

bool MoeLayer::ownRow(const MoeActivations& a, size_t row) const {
  return !split_.model ||
         (row >= a.offsets[split_.first] && row < a.offsets[split_.first + split_.held]);
}

void MoeLayer::mlpForward(const MlpTensors<const float>& p, const float* x, size_t rows, size_t ff1,
                          size_t ff, float* fc1, float* act, float* y, bool timed) const {
  if (rows == 0) return;
  const size_t h = h_;
  auto gemm = [&](bool tb, size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b,
                  size_t ldb, float* c, size_t ldc) {
    if (timed)
      product(acc_, false, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    else
      kernels::gemmF32(acc_, false, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  };
  gemm(true, rows, ff1, h, x, h, p.fc1w, h, fc1, ff1);
  {
    std::optional<KernelTimer> timer;
    if (timed) timer.emplace(KernelFamily::ElementWise);
    if (p.fc1b) addBiasRows(acc_, k_, fc1, p.fc1b, rows, ff1);
    const kernels::Unit unit = unitOf(c_.activation);
    if (ff1 == 2 * ff)
      k_.gatedForward(unit, act, fc1, rows, ff);
    else
      k_.unitForward(unit, act, fc1, rows * ff);
  }
  gemm(true, rows, h, ff, act, ff, p.fc2w, ff, y, h);
  if (p.fc2b) addBiasRows(acc_, k_, y, p.fc2b, rows, h);
}

void MoeLayer::mlpBackward(const MlpTensors<const float>& p, const MlpTensors<float>& g,
                           const float* x, size_t rows, size_t ff1, size_t ff, const float* fc1,
                           const float* act, const float* dY, float* dX, float* dAct, float* dFc1,
                           bool timed) const {
  if (rows == 0) return;
  const size_t h = h_;
  auto gemm = [&](bool ta, bool tb, size_t m, size_t n, size_t k, const float* a, size_t lda,
                  const float* b, size_t ldb, float beta, float* c, size_t ldc) {
    if (timed)
      product(acc_, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    else
      kernels::gemmF32(acc_, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  };
  // Bias gradients sum row blocks in a fixed order whatever the thread (row_kernels.h).
  thread_local kernels::DeviceArray<float> partials;
  if (g.fc2b) biasGradientRows(acc_, k_, g.fc2b, dY, rows, h, partials);
  gemm(true, false, h, ff, rows, dY, h, act, ff, 1.0f, g.fc2w, ff);
  gemm(false, false, rows, ff, h, dY, h, p.fc2w, ff, 0.0f, dAct, ff);
  {
    std::optional<KernelTimer> timer;
    if (timed) timer.emplace(KernelFamily::ElementWise);
    const kernels::Unit unit = unitOf(c_.activation);
    if (ff1 == 2 * ff)
      k_.gatedBackward(unit, dFc1, dAct, fc1, rows, ff);
    else
      k_.unitBackward(unit, dFc1, dAct, fc1, rows * ff);
    if (g.fc1b) biasGradientRows(acc_, k_, g.fc1b, dFc1, rows, ff1, partials);
  }
  gemm(true, false, ff1, h, rows, dFc1, ff1, x, h, 1.0f, g.fc1w, h);
  gemm(false, false, rows, h, ff1, dFc1, ff1, p.fc1w, h, 0.0f, dX, h);
}

std::vector<std::vector<size_t>> MoeLayer::expertPlan(const std::vector<size_t>& offsets) const {
  const size_t threads = kernels::matmulNestsInOpenMP()
                             ? static_cast<size_t>(std::max(1, kernels::matmulThreads()))
                             : 1;
  const size_t E = offsets.size() - 1, total = offsets[E];
  std::vector<size_t> order(E);
  for (size_t e = 0; e < E; ++e) order[e] = e;
  auto rows = [&](size_t e) { return offsets[e + 1] - offsets[e]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows(a) > rows(b); });
  if (threads < 2 || E < threads || rows(order[0]) * threads > total) return {};
  // Largest first, each to the least loaded thread (Graham's LPT: within 4/3 of the best).
  std::vector<std::vector<size_t>> plan(threads);
  std::vector<size_t> load(threads, 0);
  for (size_t e : order) {
    if (rows(e) == 0) continue;
    const size_t t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    plan[t].push_back(e);
    load[t] += rows(e);
  }
  return plan;
}

template <class Fn>
void MoeLayer::forExperts(const std::vector<size_t>& offsets, Fn fn) const {
  const std::vector<std::vector<size_t>> plan = expertPlan(offsets);
  if (plan.empty()) {  // one expert after another, each product on every thread
    for (size_t e = 0; e + 1 < offsets.size(); ++e) fn(e, true);
    return;
  }
  KernelTimer timer(KernelFamily::MatrixProducts);  // the whole loop: products and their passes
  kernels::parallelFor(plan.size(), [&](size_t t) {
    for (size_t e : plan[t]) fn(e, false);
  });
}

namespace {

// Expert parallelism's layout: rank j of the group computes experts [j nl, (j + 1) nl); a rank's
// rows for them (a.order's rows offsets[j nl] .. offsets[(j + 1) nl]) travel as chunk j of
// `capacity` rows. Chunk i of what a rank receives holds rank i's rows for each local expert in
// turn (recvCounts); locally they sit expert by expert, the sending ranks in order.
struct ExchangeLayout {
  size_t ranks, nl, C, h;
};

// Chunks [ranks, C, h] from / to rows in a.order's order.
void packChunks(const float* rows, const std::vector<size_t>& offsets, const ExchangeLayout& l,
                float* chunks) {
  for (size_t j = 0; j < l.ranks; ++j) {
    const size_t r0 = offsets[j * l.nl], r1 = offsets[(j + 1) * l.nl];
    std::memcpy(chunks + j * l.C * l.h, rows + r0 * l.h, (r1 - r0) * l.h * sizeof(float));
  }
}
void unpackChunks(const float* chunks, const std::vector<size_t>& offsets, const ExchangeLayout& l,
                  float* rows) {
  for (size_t j = 0; j < l.ranks; ++j) {
    const size_t r0 = offsets[j * l.nl], r1 = offsets[(j + 1) * l.nl];
    std::memcpy(rows + r0 * l.h, chunks + j * l.C * l.h, (r1 - r0) * l.h * sizeof(float));
  }
}

// fn(chunk row, local row, rows) for each run of received rows: chunk i's rows for local expert
// le, which sit locally after the earlier ranks' rows for le.
template <class Fn>
void forEachRun(const MoeExchange& x, const ExchangeLayout& l, Fn fn) {
  std::vector<size_t> next(x.localOffsets.begin(), x.localOffsets.end() - 1);
  for (size_t i = 0; i < l.ranks; ++i) {
    size_t inChunk = 0;
    for (size_t le = 0; le < l.nl; ++le) {
      const auto n = static_cast<size_t>(x.recvCounts[i * l.nl + le]);
      fn(i * l.C + inChunk, next[le], n);
      next[le] += n;
      inChunk += n;
    }
  }
}

// a.order's rows (or their gradients) to this rank's experts' rows through the group, and the
// experts' results back to a.order's rows.
void toExperts(Communicator& group, const float* rows, const std::vector<size_t>& offsets,
               const MoeExchange& x, const ExchangeLayout& l, float* send, float* recv,
               float* local) {
  packChunks(rows, offsets, l, send);
  group.allToAll(send, recv, l.C * l.h);
  forEachRun(x, l, [&](size_t chunkRow, size_t localRow, size_t n) {
    std::memcpy(local + localRow * l.h, recv + chunkRow * l.h, n * l.h * sizeof(float));
  });
}
void fromExperts(Communicator& group, const float* local, const std::vector<size_t>& offsets,
                 const MoeExchange& x, const ExchangeLayout& l, float* send, float* recv,
                 float* rows) {
  forEachRun(x, l, [&](size_t chunkRow, size_t localRow, size_t n) {  // where they came in
    std::memcpy(send + chunkRow * l.h, local + localRow * l.h, n * l.h * sizeof(float));
  });
  group.allToAll(send, recv, l.C * l.h);
  unpackChunks(recv, offsets, l, rows);
}

// The kept choices' input rows [S, h] in a.order's order (or its rows [r0, r1) only), gathered
// from the layer's input x.
const float* gatherRows(const float* x, const MoeActivations& a, size_t h,
                        std::vector<float>& buffer, size_t r0 = 0, size_t r1 = ~size_t{0}) {
  const size_t k = a.routing.k;
  r1 = std::min(r1, a.order.size());
  float* rows = sized(buffer, (r1 - r0) * h);
  for (size_t i = r0; i < r1; ++i)
    std::memcpy(rows + (i - r0) * h, x + a.order[i] / k * h, h * sizeof(float));
  return rows;
}

bool exchanged(const Communicator* group) { return group && group->size() > 1; }

}  // namespace

std::vector<size_t> MoeLayer::sliceOffsets(const MoeActivations& a) const {
  const size_t first = split_.model ? split_.first : 0, n = split_.model ? split_.held : experts_;
  std::vector<size_t> offsets(a.offsets.begin() + static_cast<std::ptrdiff_t>(first),
                              a.offsets.begin() + static_cast<std::ptrdiff_t>(first + n + 1));
  const size_t r0 = offsets.front();
  for (size_t& o : offsets) o -= r0;
  return offsets;
}

void MoeLayer::planExchange(Communicator& group, const std::vector<size_t>& offsets,
                            MoeActivations& a) const {
  const size_t E = offsets.size() - 1, ranks = static_cast<size_t>(group.size()), nl = E / ranks;
  MoeExchange& x = a.exchange;
  // Each rank's row counts for each of this rank's experts, and the chunk every rank sends.
  std::vector<float> sendCounts(E);
  for (size_t e = 0; e < E; ++e) sendCounts[e] = static_cast<float>(offsets[e + 1] - offsets[e]);
  x.recvCounts.resize(E);
  group.allToAll(sendCounts.data(), x.recvCounts.data(), nl);
  float most = 0.0f;
  for (size_t j = 0; j < ranks; ++j)
    most = std::max(most, static_cast<float>(offsets[(j + 1) * nl] - offsets[j * nl]));
  group.allReduce(&most, 1, ReduceOp::Max);
  x.capacity = static_cast<size_t>(most);
  x.localOffsets.assign(nl + 1, 0);
  for (size_t le = 0; le < nl; ++le) {
    x.localOffsets[le + 1] = x.localOffsets[le];
    for (size_t i = 0; i < ranks; ++i)
      x.localOffsets[le + 1] += static_cast<size_t>(x.recvCounts[i * nl + le]);
  }
}

void MoeLayer::runExperts(const MoeTensors<const float>& p, const float* x, MoeActivations& a,
                          MoeWorkspace& w, Communicator* group) const {
  const size_t h = h_, S = a.offsets[experts_];
  // The experts computed here or exchanged for: the model rank's slice (split over the model
  // group; the other slices' outputs left zero), else every one; their rows from r0 in a.order.
  const std::vector<size_t> slice = sliceOffsets(a);
  const size_t r0 = a.offsets[split_.model ? split_.first : 0];
  const size_t ranks = exchanged(group) ? static_cast<size_t>(group->size()) : 1;
  if (p.experts.size() != (slice.size() - 1) / ranks)
    throw Error("MoE layer: " + std::to_string(p.experts.size()) + " experts' tensors, expected " +
                std::to_string((slice.size() - 1) / ranks));
  float* y = sized(a.out, S * h);
  if (split_.model) std::fill(y, y + S * h, 0.0f);
  const float* rows = gatherRows(x, a, h, w.rows, r0, r0 + slice.back());
  // This rank's experts' rows: those, or (expert parallelism) the ones the group sent.
  const float* in = rows;
  const std::vector<size_t>* offsets = &slice;
  float* out = y + r0 * h;
  ExchangeLayout l{};
  if (exchanged(group)) {
    planExchange(*group, slice, a);
    const MoeExchange& ex = a.exchange;
    l = {ranks, (slice.size() - 1) / ranks, ex.capacity, h};
    offsets = &ex.localOffsets;
    float* received = sized(a.exchange.expertIn, offsets->back() * h);
    toExperts(*group, rows, slice, ex, l, sized(w.sendChunks, ranks * l.C * h),
              sized(w.recvChunks, ranks * l.C * h), received);
    in = received;
    out = sized(w.localRows, offsets->back() * h);
  }
  const size_t R = offsets->back();
  float* fc1 = sized(a.fc1, R * xff1_);
  float* act = sized(a.act, R * xff_);
  forExperts(*offsets, [&](size_t e, bool timed) {
    const size_t e0 = (*offsets)[e], n = (*offsets)[e + 1] - e0;
    mlpForward(p.experts[e], in + e0 * h, n, xff1_, xff_, fc1 + e0 * xff1_, act + e0 * xff_,
               out + e0 * h, timed);
  });
  if (exchanged(group))
    fromExperts(*group, out, slice, a.exchange, l, w.sendChunks.data(), w.recvChunks.data(),
                y + r0 * h);
}

void MoeLayer::runExpertsBackward(const MoeTensors<const float>& p, const MoeTensors<float>& g,
                                  const float* x, const float* dY, float* dX,
                                  const MoeActivations& a, MoeWorkspace& w,
                                  Communicator* group) const {
  const size_t h = h_;
  const std::vector<size_t> slice = sliceOffsets(a);  // as in runExperts
  const size_t r0 = a.offsets[split_.model ? split_.first : 0];
  const float* in = nullptr;
  const float* dOut = dY + r0 * h;
  const std::vector<size_t>* offsets = &slice;
  float* dIn = dX + r0 * h;
  ExchangeLayout l{};
  if (exchanged(group)) {
    const MoeExchange& ex = a.exchange;
    const size_t ranks = static_cast<size_t>(group->size());
    l = {ranks, (slice.size() - 1) / ranks, ex.capacity, h};
    offsets = &ex.localOffsets;
    float* received = sized(w.localRows, offsets->back() * h);
    toExperts(*group, dY + r0 * h, slice, ex, l, sized(w.sendChunks, ranks * l.C * h),
              sized(w.recvChunks, ranks * l.C * h), received);
    in = ex.expertIn.data();
    dOut = received;
    dIn = sized(w.localGrad, offsets->back() * h);
  } else {
    in = gatherRows(x, a, h, w.rows, r0, r0 + slice.back());
  }
  const size_t R = offsets->back();
  float* dAct = sized(w.dAct, R * xff_);
  float* dFc1 = sized(w.dFc1, R * xff1_);
  forExperts(*offsets, [&](size_t e, bool timed) {
    const size_t e0 = (*offsets)[e], n = (*offsets)[e + 1] - e0;
    mlpBackward(p.experts[e], g.experts[e], in + e0 * h, n, xff1_, xff_, a.fc1.data() + e0 * xff1_,
                a.act.data() + e0 * xff_, dOut + e0 * h, dIn + e0 * h, dAct + e0 * xff_,
                dFc1 + e0 * xff1_, timed);
  });
  if (exchanged(group))
    fromExperts(*group, dIn, slice, a.exchange, l, w.sendChunks.data(), w.recvChunks.data(),
                dX + r0 * h);
}

MoeStatistics MoeLayer::forward(const MoeTensors<const float>& p, const float* x, size_t N,
                                MoeActivations& a, MoeWorkspace& w, float* out,
                                const moe::RoutingNoise* noise, Communicator* experts) const {
  const size_t h = h_, E = experts_;
  const MoeConfig& m = c_.moe;
  // The router, on its jittered input where jitter applies (training only).
  const double eps = noise ? jitterEps(m) : 0.0;
  const float* routerIn = x;
  if (eps > 0.0) {
    float* factors = sized(a.jitter, N * h);
    float* jittered = sized(w.dPart, N * h);
    for (size_t t = 0; t < N; ++t)
      for (size_t i = 0; i < h; ++i) {
        factors[t * h + i] = jitterFactor(*noise, eps, t, i, h);
        jittered[t * h + i] = x[t * h + i] * factors[t * h + i];
      }
    routerIn = jittered;
  } else {
    a.jitter.clear();
  }
  float* logits = sized(w.logits, N * E);
  product(acc_, false, true, N, E, h, 1.0f, routerIn, h, p.router, h, 0.0f, logits, E);
  if (m.kind == MoeKind::Dropless) {
    a.routing = moe::routeDropless(logits, N, E, m.topK, m.router, noise != nullptr);
  } else {
    moe::GateOptions o;
    o.k = m.topK;
    o.capacityFactor = noise ? m.trainCapacityFactor : m.evalCapacityFactor;
    o.minCapacity = m.minCapacity;
    o.dropTokens = m.tokenDropping;
    o.useRts = m.useRts;
    o.rsample = m.noisyGate == NoisyGate::RSample;
    a.routing = moe::gateDeepSpeed(logits, N, E, o, noise);
  }
  const moe::Routing& r = a.routing;
  const size_t k = r.k;
  // The kept choices grouped by expert (tokens in order within each), and each one's row.
  a.offsets.assign(E + 1, 0);
  for (size_t i = 0; i < N * k; ++i)
    if (r.expert[i] >= 0) ++a.offsets[static_cast<size_t>(r.expert[i]) + 1];
  for (size_t e = 0; e < E; ++e) a.offsets[e + 1] += a.offsets[e];
  const size_t S = a.offsets[E];
  a.order.resize(S);
  a.slot.assign(N * k, -1);
  std::vector<size_t> next(a.offsets.begin(), a.offsets.end() - 1);
  for (size_t i = 0; i < N * k; ++i)
    if (r.expert[i] >= 0) {
      const size_t row = next[static_cast<size_t>(r.expert[i])]++;
      a.order[row] = static_cast<uint32_t>(i);
      a.slot[i] = static_cast<int32_t>(row);
    }
  // Each expert on its rows.
  runExperts(p, x, a, w, experts);
  const float* y = a.out.data();
  // Combine: each token's choices in order.
  const bool residual = p.coefw != nullptr;
  float* moeOut = residual ? sized(a.moeOut, N * h) : out;
  {
    KernelTimer timer(KernelFamily::ElementWise);
    std::fill(moeOut, moeOut + N * h, 0.0f);
    for (size_t t = 0; t < N; ++t)
      for (size_t j = 0; j < k; ++j) {
        const int32_t row = a.slot[t * k + j];
        if (row < 0) continue;
        const float wt = r.weight[t * k + j];
        const float* from = y + static_cast<size_t>(row) * h;
        for (size_t i = 0; i < h; ++i) moeOut[t * h + i] += wt * from[i];
      }
  }
  if (residual) {
    const size_t ff = residualFfn(), ff1 = c_.gated() ? 2 * ff : ff;
    float* mlpOut = sized(a.mlpOut, N * h);
    mlpForward(residualShare(p.residual), x, N, ff1, ff, sized(a.mlpFc1, N * ff1),
               sized(a.mlpAct, N * ff), mlpOut, true);
    float* coef = sized(a.coef, N * 2);
    product(acc_, false, true, N, 2, h, 1.0f, x, h, p.coefw, h, 0.0f, coef, 2);
    KernelTimer timer(KernelFamily::ElementWise);
    for (size_t t = 0; t < N; ++t) {
      const double z0 = coef[2 * t] + p.coefb[0], z1 = coef[2 * t + 1] + p.coefb[1];
      const double mx = std::max(z0, z1), e0 = std::exp(z0 - mx), e1 = std::exp(z1 - mx);
      coef[2 * t] = static_cast<float>(e0 / (e0 + e1));
      coef[2 * t + 1] = static_cast<float>(e1 / (e0 + e1));
      for (size_t i = 0; i < h; ++i)
        out[t * h + i] = moeOut[t * h + i] * coef[2 * t] + mlpOut[t * h + i] * coef[2 * t + 1];
    }
  }
  MoeStatistics s;
  s.auxLoss = r.auxLoss;
  s.dropped = r.dropped;
  s.minTokens = *std::min_element(r.counts.begin(), r.counts.end());
  s.maxTokens = *std::max_element(r.counts.begin(), r.counts.end());
  return s;
}

void MoeLayer::backward(const MoeTensors<const float>& p, const MoeTensors<float>& g,
                        const float* x, size_t N, const MoeActivations& a, MoeWorkspace& w,
                        const float* dOut, float* dx, double auxGrad, Communicator* experts) const {
  const size_t h = h_, E = experts_;
  const moe::Routing& r = a.routing;
  const size_t k = r.k, S = a.offsets[E];
  std::fill(dx, dx + N * h, 0.0f);
  // The residual's mixing: d(moe) = dOut c0, d(mlp) = dOut c1, then the coefficient's softmax.
  const float* dMoe = dOut;
  if (p.coefw) {
    const size_t ff = residualFfn(), ff1 = c_.gated() ? 2 * ff : ff;
    float* mixed = sized(w.mixed, 2 * N * h);
    float* dMlp = mixed + N * h;
    std::vector<float> dz(N * 2);  // first d(out).moe and d(out).mlp, then d(logit)s
    for (size_t t = 0; t < N; ++t) {
      double d0 = 0.0, d1 = 0.0;
      for (size_t i = 0; i < h; ++i) {
        const float go = dOut[t * h + i];
        mixed[t * h + i] = go * a.coef[2 * t];
        dMlp[t * h + i] = go * a.coef[2 * t + 1];
        d0 += static_cast<double>(go) * a.moeOut[t * h + i];
        d1 += static_cast<double>(go) * a.mlpOut[t * h + i];
      }
      dz[2 * t] = static_cast<float>(d0);
      dz[2 * t + 1] = static_cast<float>(d1);
    }
    // Split over the model group, both branches' outputs are the ranks' shares.
    if (split_.model) split_.model->allReduce(dz.data(), 2 * N);
    for (size_t t = 0; t < N; ++t) {
      const double c0 = a.coef[2 * t], c1 = a.coef[2 * t + 1], d0 = dz[2 * t], d1 = dz[2 * t + 1];
      const double dot = c0 * d0 + c1 * d1;
      dz[2 * t] = static_cast<float>(c0 * (d0 - dot));
      dz[2 * t + 1] = static_cast<float>(c1 * (d1 - dot));
    }
    dMoe = mixed;
    for (size_t t = 0; t < N; ++t) {
      g.coefb[0] += dz[2 * t];
      g.coefb[1] += dz[2 * t + 1];
    }
    product(acc_, true, false, 2, h, N, 1.0f, dz.data(), 2, x, h, 1.0f, g.coefw, h);
    if (!split_.model || split_.model->rank() == 0)  // the same on every model rank
      product(acc_, false, false, N, h, 2, 1.0f, dz.data(), 2, p.coefw, h, 1.0f, dx, h);
    float* dPart = sized(w.dPart, N * h);
    mlpBackward(p.residual, g.residual, x, N, ff1, ff, a.mlpFc1.data(), a.mlpAct.data(), dMlp,
                dPart, sized(w.dAct, N * ff), sized(w.dFc1, N * ff1), true);
    addRows(acc_, k_, dx, dPart, N, h);
  }
  // The experts: each choice's output gradient weight x d(moe), and its weight's gradient.
  float* dWeight = sized(w.dWeight, N * k);
  float* dRows = sized(w.dOutRows, S * h);
  for (size_t t = 0; t < N; ++t)
    for (size_t j = 0; j < k; ++j) {
      const int32_t row = a.slot[t * k + j];
      dWeight[t * k + j] = 0.0f;
      if (row < 0) continue;
      const float* y = a.out.data() + static_cast<size_t>(row) * h;
      const float* go = dMoe + t * h;
      const float wt = r.weight[t * k + j];
      double dot = 0.0;
      float* d = dRows + static_cast<size_t>(row) * h;
      for (size_t i = 0; i < h; ++i) {
        dot += static_cast<double>(go[i]) * y[i];
        d[i] = wt * go[i];
      }
      dWeight[t * k + j] = static_cast<float>(dot);
    }
  // Split over the model group, a choice's output is on its expert's rank only (zero elsewhere):
  // the sum is each weight's gradient, exactly.
  if (split_.model) split_.model->allReduce(dWeight, N * k);
  float* dX = sized(w.dRows, S * h);
  runExpertsBackward(p, g, x, dRows, dX, a, w, experts);
  for (size_t t = 0; t < N; ++t)
    for (size_t j = 0; j < k; ++j) {
      const int32_t row = a.slot[t * k + j];
      if (row >= 0 && ownRow(a, static_cast<size_t>(row)))
        addRows(acc_, k_, dx + t * h, dX + static_cast<size_t>(row) * h, 1, h);
    }
  // The router: d(logits), its weight's gradient and the input's share (through the jitter).
  float* dLogits = sized(w.dLogits, N * E);
  moe::routingBackward(r, c_.moe, dWeight, auxGrad, dLogits);
  const float* routerIn = x;
  float* dPart = sized(w.dPart, N * h);
  if (!a.jitter.empty()) {  // the router saw x J: its input again, and J on the way back
    for (size_t i = 0; i < N * h; ++i) dPart[i] = x[i] * a.jitter[i];
    routerIn = dPart;
  }
  product(acc_, true, false, E, h, N, 1.0f, dLogits, E, routerIn, h, 1.0f, g.router, h);
  product(acc_, false, false, N, h, E, 1.0f, dLogits, E, p.router, h, 0.0f, dPart, h);
  if (!a.jitter.empty())
    for (size_t i = 0; i < N * h; ++i) dPart[i] *= a.jitter[i];
  // Split: every model rank computed the same router share; the block sums the ranks' dx.
  if (!split_.model || split_.model->rank() == 0) addRows(acc_, k_, dx, dPart, N, h);
}

}  // namespace ds::runtime::gpt
