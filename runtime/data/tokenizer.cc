// parseTokenizerType / makeTokenizer: the accepted names in one table.
#include "runtime/data/tokenizer.h"

#include <cctype>

#include "common/error.h"
#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/spm_tokenizer.h"

namespace ds::runtime {

namespace {

struct TypeName {
  const char* name;
  TokenizerType type;
};
// The first name of each type is the one messages use.
constexpr TypeName kTypeNames[] = {
    {"ByteTokenizer", TokenizerType::Byte},
    {"GPT2BPETokenizer", TokenizerType::Gpt2Bpe},
    {"HFTokenizer", TokenizerType::Hf},
    {"SPMTokenizer", TokenizerType::SentencePiece},
    {"byte", TokenizerType::Byte},
};

// NeoX compares tokenizer-type lowercased ("gpt2bpetokenizer" is its GPT2BPETokenizer).
bool sameIgnoringCase(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i] != '\0'; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return i == a.size() && b[i] == '\0';
}

}  // namespace

TokenizerType parseTokenizerType(const std::string& name) {
  std::string accepted;
  for (const auto& t : kTypeNames) {
    if (sameIgnoringCase(name, t.name)) return t.type;
    accepted += std::string(accepted.empty() ? "" : ", ") + t.name;
  }
  throw Error("tokenizer-type: " + name + " is not implemented; accepted: " + accepted +
              " (NeoX's CharLevelTokenizer, HFGPT2Tokenizer and TiktokenTokenizer are not)");
}

const char* tokenizerTypeName(TokenizerType type) {
  for (const auto& t : kTypeNames)
    if (t.type == type) return t.name;
  return "?";
}

std::unique_ptr<Tokenizer> makeTokenizer(const std::string& type, const std::string& vocabFile,
                                         const std::string& mergeFile) {
  switch (parseTokenizerType(type)) {
    case TokenizerType::Byte:
      if (!vocabFile.empty() || !mergeFile.empty())
        throw Error(
            std::string(vocabFile.empty() ? "merge-file " + mergeFile : "vocab-file " + vocabFile) +
            ": the byte tokenizer (tokenizer-type " + type +
            ") needs no files; set tokenizer-type GPT2BPETokenizer (vocab.json and "
            "merges.txt) or HFTokenizer (a tokenizer.json) to use them, or drop the file");
      return std::make_unique<ByteTokenizer>();
    case TokenizerType::Gpt2Bpe:
      if (vocabFile.empty() || mergeFile.empty())
        throw Error(
            "tokenizer-type GPT2BPETokenizer needs vocab-file (GPT-2's vocab.json) and "
            "merge-file (its merges.txt); " +
            std::string(vocabFile.empty() ? "vocab-file" : "merge-file") +
            " is not set. GPT2BPETokenizer is NeoX's default tokenizer-type: give both files, "
            "or set tokenizer-type: ByteTokenizer for the byte-level tokenizer that needs none");
      return std::make_unique<BpeTokenizer>(vocabFile, mergeFile);
    case TokenizerType::Hf:
      if (vocabFile.empty())
        throw Error(
            "tokenizer-type HFTokenizer needs vocab-file: the Hugging Face tokenizer.json "
            "(pythia's and NeoX-20B's is 20B_tokenizer.json); vocab-file is not set");
      return std::make_unique<HfTokenizer>(vocabFile);
    case TokenizerType::SentencePiece:
      if (vocabFile.empty())
        throw Error(
            "tokenizer-type SPMTokenizer needs vocab-file: the SentencePiece model (LLaMA's "
            "tokenizer.model); vocab-file is not set");
      return makeSpmTokenizer(vocabFile);
  }
  throw Error("tokenizer-type " + type + ": unhandled");
}

}  // namespace ds::runtime
