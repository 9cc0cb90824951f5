// Fuzz target: a SentencePiece model (NeoX's SPMTokenizer vocab-file, e.g. LLaMA's
// tokenizer.model) loaded by makeTokenizer, then used (tokenizer_check.h).
#include "fuzz/fuzz_target.h"
#include "fuzz/tokenizer_check.h"

namespace ds::fuzz {
namespace {

void fuzzSpmModel(std::string_view input) {
  const std::string path = writeScratchFile("tokenizer.model", input);
  exerciseTokenizer(*runtime::makeTokenizer("SPMTokenizer", path, ""));
}

}  // namespace

DS_FUZZ_TARGET(spm_model, fuzzSpmModel);

}  // namespace ds::fuzz
