#include "runtime/comm/quantized_collectives.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/comm/block_quantize.h"

namespace ds::runtime {

void quantizedAllGather(Communicator& comm, const float* own, size_t chunk, float* all) {
  const BlockQuantizer q = weightQuantizer(chunk);
  const size_t bytes = q.bytes(chunk);
  std::vector<uint8_t> mine(bytes), gathered(bytes * static_cast<size_t>(comm.size()));
  q.quantize(own, chunk, mine.data());
  // Quantised buffers are whole 16-bit words: the 16-bit collectives carry them bit for bit.
  comm.allGather(mine.data(), gathered.data(), bytes / 2, DType::F16);
  for (int r = 0; r < comm.size(); ++r)
    q.dequantize(gathered.data() + static_cast<size_t>(r) * bytes, chunk,
                 all + static_cast<size_t>(r) * chunk);
}

void quantizedReduceScatter(Communicator& node, Communicator& crossNode, const float* in,
                            float* out, size_t chunk, size_t block) {
  const auto places = static_cast<size_t>(node.size()), nodes = static_cast<size_t>(crossNode.size());
  const BlockQuantizer q{4, block};
  const size_t bytes = q.bytes(chunk);
  // Hop 1: to node peer p, the chunks of the ranks at place p of every node, node by node.
  std::vector<uint8_t> send(places * nodes * bytes), received(send.size());
  for (size_t p = 0; p < places; ++p)
    for (size_t n = 0; n < nodes; ++n)
      q.quantize(in + (n * places + p) * chunk, chunk, send.data() + (p * nodes + n) * bytes);
  node.allToAll(send.data(), received.data(), nodes * bytes / 2, DType::F16);
  // This node's partial sums of the chunks of this rank's place, node by node, quantised again.
  std::vector<float> partial(chunk);
  std::vector<uint8_t> partials(nodes * bytes), fromNodes(nodes * bytes);
  for (size_t n = 0; n < nodes; ++n) {
    for (size_t p = 0; p < places; ++p)
      q.dequantize(received.data() + (p * nodes + n) * bytes, chunk, partial.data(), p > 0);
    q.quantize(partial.data(), chunk, partials.data() + n * bytes);
  }
  // Hop 2: to node n's rank of this place, this node's partial sum of its chunk.
  crossNode.allToAll(partials.data(), fromNodes.data(), bytes / 2, DType::F16);
  for (size_t n = 0; n < nodes; ++n) q.dequantize(fromNodes.data() + n * bytes, chunk, out, n > 0);
}

}  // namespace ds::runtime
