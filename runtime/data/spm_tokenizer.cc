// SpmTokenizer: NeoX's SentencePieceTokenizer over libds_spm.so (spm_library_api.h says why
// sentencepiece sits in a module of its own), which is loaded on first use: jobs with other
// tokenizers never load it.
#include "runtime/data/spm_tokenizer.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "common/error.h"
#include "runtime/data/spm_charsmap.h"
#include "runtime/data/spm_library_api.h"

namespace ds::runtime {

namespace {

constexpr const char* kFix =
    "vocab-file must be a SentencePiece model for tokenizer-type SPMTokenizer (LLaMA's "
    "tokenizer.model, or one spm_train wrote)";
constexpr size_t kErrorSize = 512;

// RTLD_LOCAL keeps the module's protobuf symbols out of the process's scope; RTLD_DEEPBIND makes
// libsentencepiece resolve them to its own copy rather than to gRPC's libprotobuf.
const DsSpmApi& spmLibrary() {
  static std::once_flag once;
  static const DsSpmApi* api = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path() / kDsSpmLibraryName).string());
    candidates.push_back(DS_SPM_LIBRARY);
    for (const auto& path : candidates) {
      if (!std::filesystem::exists(path, ec)) continue;
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        failure += std::string(failure.empty() ? "" : "; ") + dlerror();
        continue;
      }
      const auto entry = reinterpret_cast<const DsSpmApi* (*)()>(dlsym(handle, "dsSpmApi"));
      if (entry != nullptr) {
        api = entry();
        return;
      }
      failure += "; " + path + ": no dsSpmApi";
    }
    if (failure.empty())
      failure = std::string(kDsSpmLibraryName) + " is neither beside this program nor at " +
                DS_SPM_LIBRARY;
  });
  if (api == nullptr)
    throw Error("tokenizer-type SPMTokenizer: cannot load the SentencePiece module (" + failure +
                "); it is built with the project (target ds_spm) and must stay beside the "
                "programs in bin/");
  return *api;
}

class SpmTokenizer : public Tokenizer {
 public:
  explicit SpmTokenizer(const std::string& modelFile) : api_(spmLibrary()), file_(modelFile) {
    // The model is read here rather than by sentencepiece's Load, which throws on a directory.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file_, ec))
      throw Error("vocab-file " + file_ + ": " +
                  (std::filesystem::exists(file_, ec) ? "not a regular file" : "no such file") +
                  "; " + kFix);
    const auto size = std::filesystem::file_size(file_, ec);
    if (ec) throw Error("vocab-file " + file_ + ": cannot read (" + ec.message() + "); " + kFix);
    std::ifstream in(file_, std::ios::binary);
    std::string bytes(size, '\0');
    if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(size)))
      throw Error("vocab-file " + file_ + ": cannot read; " + kFix);
    // Before the library sees it: a model with self-test samples encodes them while loading.
    if (const auto problem = checkSpmCharsmaps(bytes))
      throw Error("vocab-file " + file_ + ": " + *problem +
                  "; the model's normalization rules are damaged (SentencePiece would read "
                  "outside them): use the file as spm_train or the model's publisher wrote it");
    char error[kErrorSize] = "";
    model_ = api_.load(bytes.data(), bytes.size(), error, sizeof error);
    if (model_ == nullptr)
      throw Error("vocab-file " + file_ + ": not a SentencePiece model (" + error + "); " + kFix);
    vocabularySize_ = api_.pieceSize(model_);
    if (vocabularySize_ <= 0) {
      api_.release(model_);
      throw Error("vocab-file " + file_ + ": the model has no pieces; " + kFix);
    }
    const std::string endOfText = "<|endoftext|>";
    endOfDocument_ = api_.pieceToId(model_, endOfText.data(), endOfText.size());
  }
  ~SpmTokenizer() override { api_.release(model_); }
  SpmTokenizer(const SpmTokenizer&) = delete;
  SpmTokenizer& operator=(const SpmTokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    char error[kErrorSize] = "";
    const auto sink = [](void* context, const int32_t* data, size_t count) {
      static_cast<std::vector<int32_t>*>(context)->assign(data, data + count);
    };
    if (!api_.encode(model_, text.data(), text.size(), sink, &ids, error, sizeof error))
      throw Error("SPMTokenizer " + file_ + ": encode failed: " + error);
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> known;
    known.reserve(ids.size());
    for (int32_t id : ids)
      if (id >= 0 && id < vocabularySize_) known.push_back(id);
    std::string text;
    char error[kErrorSize] = "";
    const auto sink = [](void* context, const char* data, size_t size) {
      static_cast<std::string*>(context)->assign(data, size);
    };
    if (!api_.decode(model_, known.data(), known.size(), sink, &text, error, sizeof error))
      throw Error("SPMTokenizer " + file_ + ": decode failed: " + error);
    return text;
  }

  int32_t endOfDocument() const override { return endOfDocument_; }
  int32_t vocabularySize() const override { return vocabularySize_; }

 private:
  const DsSpmApi& api_;
  std::string file_;
  void* model_ = nullptr;
  int32_t vocabularySize_ = 0;
  int32_t endOfDocument_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> makeSpmTokenizer(const std::string& modelFile) {
  return std::make_unique<SpmTokenizer>(modelFile);
}

}  // namespace ds::runtime
