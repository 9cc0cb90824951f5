// The fused element-wise and row-wise kernels of the GPT model (matrix products go to a BLAS):
// layer, RMS and scale norms, GeLU/GeGLU and the other (gated) activations, causal softmax, rotary
// embedding, cross-entropy and embedding gather/scatter, forward and backward, in fp32 over
// row-major [rows, dim] arrays. One source (transformer_kernels_impl.h) is compiled three times:
// scalar (vectorisation off), AVX2 (with FMA) and AVX-512; the run picks the widest the CPU has.
// Every sum uses 16 partial accumulators combined in a fixed tree, nothing is contracted into an
// FMA, and the explicit fused multiply-adds (std::fma, exp and GeLU) round once on every path, so
// the three paths give bitwise the same results: ranks on machines with different CPUs stay
// identical replicas.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::kernels {

enum class KernelIsa { Scalar, Avx2, Avx512 };

// The element-wise functions of the MLP: GeLU, ReLU, SiLU (x * sigmoid(x)), softsign
// (x / (1 + |x|)), Mish (x * tanh(softplus(x))), sigmoid and identity (the gates of ReGLU, SwiGLU,
// GLU and bilinear). Gelu: the tanh approximation (GPT-2's, NeoX's fused bias-GeLU); GeGLU is the
// gated Gelu.
enum class Unit { Gelu, Relu, Silu, Sigmoid, Identity, Softsign, Mish };

const char* kernelIsaName(KernelIsa isa);
bool kernelIsaSupported(KernelIsa isa);
KernelIsa bestKernelIsa();

struct TransformerKernels {
  // LayerNorm over each row: out = (x - mean) * rstd * w + b; mean/rstd per row are kept for the
  // backward. Backward writes dx and adds into dw, db.
  void (*layerNormForward)(float* out, float* mean, float* rstd, const float* x, const float* w,
                           const float* b, size_t rows, size_t dim, float eps);
  void (*layerNormBackward)(float* dx, float* dw, float* db, const float* dout, const float* x,
                            const float* mean, const float* rstd, const float* w, size_t rows,
                            size_t dim);
  // GPT-NeoX's RMSNorm: out = x * rsqrt(mean(x^2) + eps) * w (as NeoX since 2025, and LLaMA).
  // `norm` per row keeps rsqrt(mean(x^2) + eps); backward reads eps from it.
  void (*rmsNormForward)(float* out, float* norm, const float* x, const float* w, size_t rows,
                         size_t dim, float eps);
  void (*rmsNormBackward)(float* dx, float* dw, const float* dout, const float* x,
                          const float* norm, const float* w, size_t rows, size_t dim, float eps);
  // out = f(in), din = dout * f'(in); out may alias in, din may alias dout. ReLU's derivative
  // at 0 is 0 (PyTorch's).
  void (*unitForward)(Unit f, float* out, const float* in, size_t n);
  void (*unitBackward)(Unit f, float* din, const float* dout, const float* in, size_t n);
  // Gated: in is [rows, 2 * ff] = [x | gate]; out [rows, ff] = x * f(gate) (NeoX's order).
  void (*gatedForward)(Unit f, float* out, const float* in, size_t rows, size_t ff);
  void (*gatedBackward)(Unit f, float* din, const float* dout, const float* in, size_t rows,
                        size_t ff);
  // GPT-NeoX's ScaleNorm: out = x / max(|x|, eps) * g with one scalar gain g; `norm` per row
  // keeps |x|. Backward writes dx and adds d(loss)/dg into *dg.
  void (*scaleNormForward)(float* out, float* norm, const float* x, float g, size_t rows,
                           size_t dim, float eps);
  void (*scaleNormBackward)(float* dx, float* dg, const float* dout, const float* x,
                            const float* norm, float g, size_t rows, size_t dim, float eps);
  // Causal softmax of a whole [T, T] score block in place: row i over columns
  // max(0, i - window)..i, zeros elsewhere; window >= t is plain causal attention. With
  // softmaxBackward, the attention that stores [T, T] (the tests' and bench_attention's reference;
  // the model runs flash attention, kernels/cpu/flash_attention.h, on the tile kernels below).
  void (*causalSoftmaxForward)(float* scores, size_t t, size_t window);
  // dscores = p * (dp - sum(p * dp)) per row, in place over dp.
  void (*softmaxBackward)(float* dp, const float* p, size_t t);
  // Flash attention's tiles. A tile s [rows, cols] (rows ld apart) holds scaled scores of queries
  // query0.. against keys key0..; query i sees keys max(0, i - window)..i, and a row's columns it
  // does not see are set to zero (their scores are never read).
  // The online softmax step: with rowMax/rowSum the maximum and sum of exp(score - maximum) so far
  // (rowMax -inf: none yet; the output row is zeroed and rowSum set), the tile becomes
  // exp(score - new maximum), the sum and out's row (dim floats, outLd apart) are rescaled to the
  // new maximum, and the tile's sum is added. The caller then adds tile x values into out.
  void (*attentionTileSoftmax)(float* s, size_t ld, size_t rows, size_t cols, size_t query0,
                               size_t key0, size_t window, float* rowMax, float* rowSum,
                               float* out, size_t outLd, size_t dim);
  // After the last tile: out's rows divided by their sums, and rowSum replaced by 1 / sum.
  void (*attentionRowsFinish)(float* out, size_t outLd, size_t dim, size_t rows, float* rowSum);
  // The backward's recomputation: the tile becomes the probabilities exp(score - rowMax) *
  // rowInvSum.
  void (*attentionTileProbs)(float* s, size_t ld, size_t rows, size_t cols, size_t query0,
                             size_t key0, size_t window, const float* rowMax,
                             const float* rowInvSum);
  // dp = p * (dp - rowDot[r]) over a tile: d(scores) from d(probabilities), rowDot being
  // sum_j p dp of the whole row (= dOut . out, which flash attention has without the row).
  void (*attentionTileScoreGrad)(float* dp, const float* p, size_t ld, size_t rows, size_t cols,
                                 const float* rowDot);
  // out[r] = a[r] . b[r] over dim, rows lda / ldb apart.
  void (*rowDots)(float* out, const float* a, size_t lda, const float* b, size_t ldb, size_t rows,
                  size_t dim);
  // Rotary embedding (NeoX's rotate-half layout) on the first rotDim dims of `heads` head vectors
  // of headDim at stride `stride` within each of `rows` rows; position of row r is r % seq.
  // cos/sin tables are [seq, rotDim / 2]. inverse = true applies the transpose (backward).
  void (*rotary)(float* x, size_t rows, size_t seq, size_t heads, size_t headDim, size_t stride,
                 size_t rotDim, const float* cos, const float* sin, bool inverse);
  // Cross-entropy of each row of logits [rows, vocab] against targets; returns the sum of the
  // rows' losses and overwrites the logits with d(sum_loss * gradScale)/d(logits). A negative
  // target masks its row (NeoX's label -100): it adds no loss and its gradient row is zero.
  double (*crossEntropy)(float* logits, const int32_t* targets, size_t rows, size_t vocab,
                         float gradScale);
  // out[r] = table[ids[r]] (+ pos[r % seq] when pos is not null).
  void (*embeddingForward)(float* out, const int32_t* ids, const float* table, const float* pos,
                           size_t rows, size_t seq, size_t dim);
  // dtable[ids[r]] += dout[r] (and dpos[r % seq] += dout[r] when dpos is not null), rows in order.
  void (*embeddingBackward)(float* dtable, float* dpos, const int32_t* ids, const float* dout,
                            size_t rows, size_t seq, size_t dim);
  // out[r] += bias; dbias += sum over rows of dout[r].
  void (*addBias)(float* out, const float* bias, size_t rows, size_t dim);
  void (*biasGradient)(float* dbias, const float* dout, size_t rows, size_t dim);
  // y += x (residual connections and gradient sums).
  void (*add)(float* y, const float* x, size_t n);
  // Dropout: out[i] = in[i] * (keep ? keepScale : 0), element first + i of the mask drawn from
  // `base`, kept when the top 24 bits of splitmix64's finaliser of base + first + i are at or above
  // `threshold` (p * 2^24). out may be in. Any range of a mask equals that range of the whole.
  void (*dropout)(const float* in, float* out, size_t n, uint64_t base, uint64_t first,
                  uint32_t threshold, float keepScale);
  // Parameter initialisation: out[0, n) = scale * N(0, 1) samples, Box-Muller pairs (cos, sin) from
  // draws[2i] (radius) and draws[2i + 1] (angle), 2 * ceil(n / 2) 64-bit uniform draws in all.
  void (*normalFromDraws)(float* out, size_t n, const uint64_t* draws, float scale);
  // Elements [first, first + n) of a normal tensor drawn from Philox4x32-10 (philox.h): element
  // pair (2j, 2j + 1) is normalFromDraws' pair from block j's two draws (key seed, counter (j,
  // stream)); out[i] = element first + i, so any range equals the same range of a whole draw.
  void (*normalFromPhilox)(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
                           float scale);
};

const TransformerKernels& transformerKernels(KernelIsa isa);
inline const TransformerKernels& transformerKernels() { return transformerKernels(bestKernelIsa()); }

}  // namespace ds::kernels
