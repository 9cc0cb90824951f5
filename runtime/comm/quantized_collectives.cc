#include "runtime/comm/quantized_collectives.h"

#include <cstdint>
#include <vector>

#include "runtime/comm/block_quantize.h"
#include "runtime/comm/elementwise_reduce.h"

namespace ds::runtime {
namespace {

const void* at(const void* base, size_t elements, DType type) {
  return static_cast<const char*>(base) + elements * dtypeBytes(type);
}

}  // namespace

void quantizedAllGather(Communicator& comm, const void* own, size_t chunk, DType type, void* all) {
  const BlockQuantizer q = weightQuantizer(chunk);
  const size_t bytes = q.bytes(chunk);
  std::vector<float> values(chunk);
  std::vector<uint8_t> mine(bytes), gathered(bytes * static_cast<size_t>(comm.size()));
  toFloat(own, values.data(), chunk, type);
  q.quantize(values.data(), chunk, mine.data());
  // Quantised buffers are whole 16-bit words: the 16-bit collectives carry them bit for bit.
  comm.allGather(mine.data(), gathered.data(), bytes / 2, DType::F16);
  for (size_t r = 0; r < static_cast<size_t>(comm.size()); ++r) {
    q.dequantize(gathered.data() + r * bytes, chunk, values.data());
    fromFloat(values.data(), static_cast<char*>(all) + r * chunk * dtypeBytes(type), chunk, type);
  }
}

void quantizedReduceScatter(Communicator& node, Communicator& crossNode, const void* in, void* out,
                            size_t chunk, DType type, size_t block) {
  const auto places = static_cast<size_t>(node.size()),
             nodes = static_cast<size_t>(crossNode.size());
  const BlockQuantizer q{4, block};
  const size_t bytes = q.bytes(chunk);
  std::vector<float> values(chunk), sum(chunk);
  // Hop 1: to node peer p, the chunks of the ranks at place p of every node, node by node.
  std::vector<uint8_t> send(places * nodes * bytes), received(send.size());
  for (size_t p = 0; p < places; ++p)
    for (size_t n = 0; n < nodes; ++n) {
      toFloat(at(in, (n * places + p) * chunk, type), values.data(), chunk, type);
      q.quantize(values.data(), chunk, send.data() + (p * nodes + n) * bytes);
    }
  node.allToAll(send.data(), received.data(), nodes * bytes / 2, DType::F16);
  // This node's partial sums of the chunks of this rank's place, node by node, quantised again
  // (into `send`, free now).
  for (size_t n = 0; n < nodes; ++n) {
    for (size_t p = 0; p < places; ++p)
      q.dequantize(received.data() + (p * nodes + n) * bytes, chunk, sum.data(), p > 0);
    q.quantize(sum.data(), chunk, send.data() + n * bytes);
  }
  // Hop 2: to node n's rank of this place, this node's partial sum of its chunk.
  crossNode.allToAll(send.data(), received.data(), bytes / 2, DType::F16);
  for (size_t n = 0; n < nodes; ++n)
    q.dequantize(received.data() + n * bytes, chunk, sum.data(), n > 0);
  fromFloat(sum.data(), out, chunk, type);
}

}  // namespace ds::runtime
