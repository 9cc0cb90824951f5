// Fuzz target: a Hugging Face tokenizer.json (NeoX's HFTokenizer vocab-file) loaded by
// makeTokenizer as the GPT job and ds-preprocess load it, then used (tokenizer_check.h).
#include "fuzz/fuzz_target.h"
#include "fuzz/tokenizer_check.h"

namespace ds::fuzz {
namespace {

void fuzzHfTokenizer(std::string_view input) {
  const std::string path = writeScratchFile("tokenizer.json", input);
  exerciseTokenizer(*runtime::makeTokenizer("HFTokenizer", path, ""));
}

}  // namespace

DS_FUZZ_TARGET(hf_tokenizer, fuzzHfTokenizer);

}  // namespace ds::fuzz
