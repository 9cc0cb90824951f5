// bench_kernels: the GPT's element-wise and row-wise kernels (kernels/cpu/transformer_kernels.h)
// on one thread, on every instruction-set path this CPU runs, at the demo model's shapes, beside
// the scalar path measured in the same run:
//   scalar  the same kernel compiled without vectorisation: "x scalar" is what the vector path
//           gains (a path near 1x has lost its vectorisation: AVX2's exp-based loops once ran
//           scalar because GCC would not if-convert them);
// GB/s counts each array read or written once. At the demo's sizes (1 MB hidden-wide arrays, 4 MB
// MLP-wide ones) the arrays sit in L2 or L3, whose bandwidth (50-80 GB/s on one core here) bounds
// the simple kernels (bias, residual add); the exp- and division-bound ones (GeLU, SiLU, softmax,
// cross-entropy) run far below it.
// Usage: bench_kernels [--rows 1024] [--hidden 256] [--ffn 1024] [--seq 128] [--reps 20] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "kernels/cpu/transformer_kernels.h"

using namespace ds::kernels;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best seconds of one call over `reps` calls after a warm-up.
double bestSeconds(const std::function<void()>& call, int reps) {
  call();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double start = now();
    call();
    best = std::min(best, now() - start);
  }
  return best;
}

struct Shape {
  size_t rows = 1024, hidden = 256, ffn = 1024, seq = 128;
};

// Inputs in a realistic range (activations within a few units, probabilities summing to one).
struct Arrays {
  explicit Arrays(const Shape& s)
      : big(s.rows * s.ffn), big2(s.rows * s.ffn), big3(s.rows * s.ffn), row(s.ffn), row2(s.ffn), row3(s.ffn),
        stats(s.rows), stats2(s.rows), targets(s.rows) {
    for (size_t i = 0; i < big.size(); ++i) {
      big[i] = static_cast<float>(i % 97) * 0.05f - 2.4f;
      big2[i] = static_cast<float>(i % 13) * 0.01f;
    }
    for (size_t i = 0; i < row.size(); ++i) row[i] = 1.0f + static_cast<float>(i % 7) * 0.01f;
    for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>(i % 200);
  }
  std::vector<float> big, big2, big3, row, row2, row3, stats, stats2;
  std::vector<int32_t> targets;
};

struct Kernel {
  const char* name;
  double bytes;  // minimal traffic of one call
  std::function<void(const TransformerKernels&, Arrays&)> call;
};

std::vector<Kernel> kernelsAt(const Shape& s) {
  const size_t N = s.rows, h = s.hidden, ff = s.ffn, T = s.seq, heads = N * ff / (T * T);
  const double hid = static_cast<double>(N * h) * 4, mlp = static_cast<double>(N * ff) * 4,
               probs = static_cast<double>(heads * T * T) * 4;
  return {
      {"layer norm forward", 2 * hid,
       [=](const TransformerKernels& k, Arrays& a) {
         k.layerNormForward(a.big3.data(), a.stats.data(), a.stats2.data(), a.big.data(),
                            a.row.data(), a.row2.data(), N, h, 1e-5f);
       }},
      {"layer norm backward", 3 * hid,
       [=](const TransformerKernels& k, Arrays& a) {
         k.layerNormBackward(a.big3.data(), a.row2.data(), a.row3.data(), a.big2.data(),
                             a.big.data(), a.stats.data(), a.stats2.data(), a.row.data(), N, h);
       }},
      {"gelu forward", 2 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.unitForward(Unit::Gelu, a.big3.data(), a.big.data(), N * ff);
       }},
      {"gelu backward", 3 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.unitBackward(Unit::Gelu, a.big3.data(), a.big2.data(), a.big.data(), N * ff);
       }},
      {"swiglu forward", 1.5 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.gatedForward(Unit::Silu, a.big3.data(), a.big.data(), N / 2, ff);
       }},
      {"swiglu backward", 2.5 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.gatedBackward(Unit::Silu, a.big3.data(), a.big2.data(), a.big.data(), N / 2, ff);
       }},
      {"causal softmax forward", 2 * probs,
       [=](const TransformerKernels& k, Arrays& a) {
         std::memcpy(a.big3.data(), a.big.data(), heads * T * T * sizeof(float));
         for (size_t b = 0; b < heads; ++b) k.causalSoftmaxForward(a.big3.data() + b * T * T, T, T);
       }},
      {"softmax backward", 3 * probs,
       [=](const TransformerKernels& k, Arrays& a) {
         for (size_t b = 0; b < heads; ++b)
           k.softmaxBackward(a.big3.data() + b * T * T, a.big2.data() + b * T * T, T);
       }},
      {"add bias", 2 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.addBias(a.big3.data(), a.row.data(), N, ff);
       }},
      {"bias gradient", mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.biasGradient(a.row2.data(), a.big.data(), N, ff);
       }},
      {"residual add", 3 * hid,
       [=](const TransformerKernels& k, Arrays& a) { k.add(a.big3.data(), a.big.data(), N * h); }},
      {"dropout (p 0.1)", 2 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         k.dropout(a.big.data(), a.big3.data(), N * ff, 0x9e3779b97f4a7c15ull, 0, 1677722,
                   1.0f / 0.9f);
       }},
      {"cross-entropy", 2 * mlp,
       [=](const TransformerKernels& k, Arrays& a) {
         std::memcpy(a.big3.data(), a.big.data(), N * ff * sizeof(float));
         k.crossEntropy(a.big3.data(), a.targets.data(), N, ff, 1.0f);
       }},
  };
}

}  // namespace

int run(int argc, char** argv) {
  Shape s;
  int reps = 20;
  bool json = false;
  CLI::App app{
      "bench_kernels: the GPT's element-wise kernels on every instruction-set path beside the "
      "scalar path"};
  ds::bench::showDefaults(app);
  app.add_option("--rows", s.rows, "tokens per call (micro-batch x seq)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  app.add_option("--hidden", s.hidden, "hidden size")->check(CLI::Range(size_t{1}, size_t{65536}));
  app.add_option("--ffn", s.ffn, "MLP width")->check(CLI::Range(size_t{1}, size_t{262144}));
  app.add_option("--seq", s.seq, "sequence length (softmax blocks)")
      ->check(CLI::Range(size_t{1}, size_t{8192}));
  app.add_option("--reps", reps, "timed calls (the best is kept)")->check(CLI::Range(1, 100000));
  app.add_flag("--json", json, "print one JSON line per kernel and path");
  if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
  if (s.seq * s.seq > s.rows * s.ffn || s.hidden > s.ffn || s.rows < 2)
    throw ds::Error("--seq^2 and --hidden must fit in --rows x --ffn (the arrays "
                    "are sized by them), and --rows must be at least 2");

  Arrays arrays(s);
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
    if (kernelIsaSupported(isa)) isas.push_back(isa);
  if (!json) {
    std::printf(
        "bench_kernels: rows %zu, hidden %zu, ffn %zu, seq %zu; one thread, best of %d calls; "
        "x scalar: against the unvectorised build\n",
        s.rows, s.hidden, s.ffn, s.seq, reps);
    std::printf("%-24s %-7s %9s %8s %9s\n", "kernel", "path", "ms/call", "GB/s", "x scalar");
  }
  for (const Kernel& kernel : kernelsAt(s)) {
    double scalar = 0;
    for (KernelIsa isa : isas) {
      const TransformerKernels& k = transformerKernels(isa);
      const double seconds = bestSeconds([&] { kernel.call(k, arrays); }, reps);
      if (isa == KernelIsa::Scalar) scalar = seconds;
      const double rate = kernel.bytes / seconds;
      if (json) {
        ds::printJsonLine({{"bench", "kernels"},
                           {"kernel", kernel.name},
                           {"isa", kernelIsaName(isa)},
                           {"ms", ds::rounded(seconds * 1e3, 4)},
                           {"gb_per_s", ds::rounded(rate / 1e9, 2)},
                           {"vs_scalar", ds::rounded(scalar / seconds, 2)}});
      } else {
        std::printf("%-24s %-7s %9.3f %8.1f %8.2fx\n", kernel.name, kernelIsaName(isa),
                    seconds * 1e3, rate / 1e9, scalar / seconds);
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("bench_kernels", [&] { return run(argc, argv); });
}
