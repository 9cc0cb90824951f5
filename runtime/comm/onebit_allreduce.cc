#include "runtime/comm/onebit_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/error.h"

namespace ds::runtime {
namespace {

constexpr size_t kBitsPerWord = 16;  // signs travel as 16-bit patterns

// Compresses x[0, n) into sign bits (word w, bit b: element 16 w + b is >= 0) and returns the
// scale ||x|| / sqrt(n); error[i] = x[i] - scale x sign(x[i]), what the compression lost. error
// may be x itself.
float compress(const float* x, size_t n, uint16_t* words, float* error) {
  double squares = 0.0;
  for (size_t i = 0; i < n; ++i) squares += static_cast<double>(x[i]) * x[i];
  const auto scale = static_cast<float>(std::sqrt(squares / static_cast<double>(n)));
  std::fill(words, words + n / kBitsPerWord, uint16_t{0});
  for (size_t i = 0; i < n; ++i) {
    const bool positive = x[i] >= 0.0f;
    if (positive) words[i / kBitsPerWord] |= static_cast<uint16_t>(1u << (i % kBitsPerWord));
    error[i] = x[i] - (positive ? scale : -scale);
  }
  return scale;
}

float signOf(const uint16_t* words, size_t i) {
  return (words[i / kBitsPerWord] >> (i % kBitsPerWord)) & 1u ? 1.0f : -1.0f;
}

}  // namespace

size_t oneBitPaddedCount(size_t count, int ranks) {
  const size_t unit = kBitsPerWord * static_cast<size_t>(std::max(ranks, 1));
  return std::max<size_t>(1, (count + unit - 1) / unit) * unit;
}

void OneBitErrors::reset(size_t count, int ranks) {
  const size_t padded = oneBitPaddedCount(count, ranks);
  worker.assign(padded, 0.0f);
  server.assign(padded / static_cast<size_t>(std::max(ranks, 1)), 0.0f);
}

void oneBitAllReduce(Communicator& comm, float* data, size_t count, OneBitErrors& errors) {
  const size_t n = static_cast<size_t>(comm.size()), padded = oneBitPaddedCount(count, comm.size());
  const size_t chunk = padded / n, chunkWords = chunk / kBitsPerWord;
  if (errors.worker.size() != padded || errors.server.size() != chunk)
    throw Error("1-bit all-reduce: error feedback sized for " +
                std::to_string(errors.worker.size()) + " elements, the buffer pads to " +
                std::to_string(padded) + " over " + std::to_string(n) + " ranks");
  // The worker's side: the buffer plus its error (the padding: the error alone), compressed in
  // the error's place, which then keeps the loss.
  float* worker = errors.worker.data();
  for (size_t i = 0; i < count; ++i) worker[i] = data[i] + worker[i];
  std::vector<uint16_t> signs(padded / kBitsPerWord), received(signs.size());
  float scale = compress(worker, padded, signs.data(), worker);
  std::vector<float> scales(n);
  comm.allToAll(signs.data(), received.data(), chunkWords, DType::F16);
  comm.allGather(&scale, scales.data(), 1);
  // The server's side for this rank's chunk: the average of every rank's scaled signs plus the
  // server error, compressed again in the error's place.
  float* server = errors.server.data();
  const float inverse = 1.0f / static_cast<float>(n);
  for (size_t i = 0; i < chunk; ++i) {
    float sum = 0.0f;
    for (size_t r = 0; r < n; ++r) sum += scales[r] * signOf(received.data() + r * chunkWords, i);
    server[i] = sum * inverse + server[i];
  }
  std::vector<uint16_t> serverSigns(chunkWords);
  scale = compress(server, chunk, serverSigns.data(), server);
  // Every chunk's signs and scale to every rank.
  comm.allGather(serverSigns.data(), signs.data(), chunkWords, DType::F16);
  comm.allGather(&scale, scales.data(), 1);
  for (size_t i = 0; i < count; ++i) data[i] = scales[i / chunk] * signOf(signs.data(), i);
}

}  // namespace ds::runtime
