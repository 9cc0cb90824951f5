// Fuzz target: GPT-2's vocab.json and merges.txt (NeoX's GPT2BPETokenizer vocab-file and
// merge-file) loaded by makeTokenizer, then used (tokenizer_check.h). Input: the vocabulary, a
// NUL byte, the merges (JSON text cannot hold a raw NUL, so the first one is the boundary).
#include "fuzz/fuzz_target.h"
#include "fuzz/tokenizer_check.h"

namespace ds::fuzz {
namespace {

void fuzzGpt2Bpe(std::string_view input) {
  const auto parts = splitInput(input, std::string_view("\0", 1), 2);
  const std::string vocab = writeScratchFile("vocab.json", parts[0]);
  const std::string merges = writeScratchFile("merges.txt", parts.size() > 1 ? parts[1] : "");
  exerciseTokenizer(*runtime::makeTokenizer("GPT2BPETokenizer", vocab, merges));
}

}  // namespace

DS_FUZZ_TARGET(gpt2_bpe, fuzzGpt2Bpe);

}  // namespace ds::fuzz
