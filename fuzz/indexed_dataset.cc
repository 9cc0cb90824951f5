// Fuzz target: an indexed dataset's PREFIX.idx (Megatron / NeoX "mmap" layout, from NeoX's
// preprocess_data.py or ds-preprocess) opened as a training rank opens it, every sequence then
// read and the token range taken as `ds-config check` does. Input: a little-endian u16 whose low
// 13 bits are the length of PREFIX.bin (a fixed byte pattern), then the bytes of PREFIX.idx.
#include <cstring>

#include "fuzz/fuzz_target.h"
#include "runtime/data/indexed_dataset.h"

namespace ds::fuzz {
namespace {

void fuzzIndexedDataset(std::string_view input) {
  if (input.size() < 2) return;
  // At most 8 KiB: a large .bin adds reading time, not paths through the index checks.
  const size_t binBytes =
      (static_cast<uint8_t>(input[0]) | static_cast<uint8_t>(input[1]) << 8) & 0x1fff;
  std::string bin(binBytes, '\0');
  for (size_t i = 0; i < binBytes; ++i) bin[i] = static_cast<char>(i * 131 + 7);
  writeScratchFile("data.bin", bin);
  writeScratchFile("data.idx", input.substr(2));

  const runtime::IndexedDataset dataset(scratchPath("data"));
  DS_FUZZ_CHECK(dataset.documentIndex().size() >= 1);
  DS_FUZZ_CHECK(dataset.documentIndex().back() <= static_cast<int64_t>(dataset.sequences()));
  size_t tokens = 0;
  for (size_t i = 0; i < dataset.sequences(); ++i) {
    const size_t length = dataset.sequenceLength(i);
    DS_FUZZ_CHECK(dataset.read(i).size() == length);
    DS_FUZZ_CHECK(dataset.read(i, length / 2, length - length / 2).size() == length - length / 2);
    tokens += length;
  }
  const runtime::TokenRange range = dataset.tokenRange();
  DS_FUZZ_CHECK(range.empty == (tokens == 0));
  DS_FUZZ_CHECK(range.min <= range.max);
}

}  // namespace

DS_FUZZ_TARGET(indexed_dataset, fuzzIndexedDataset);

}  // namespace ds::fuzz
