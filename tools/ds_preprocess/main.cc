// ds-preprocess: text or JSON-lines in, an mmap indexed dataset out (PREFIX_KEY_document.bin/.idx,
// GPT-NeoX's layout and names), with a progress line. Like NeoX's tools/preprocess_data.py:
//   ds-preprocess --input corpus.jsonl --json-keys text --output-prefix data/corpus --append-eod
// Text input (any file not ending in .jsonl/.json, or --format text): documents are separated by
// blank lines. Tokenizers: byte-level (the default, no files), GPT-2's BPE, a tokenizer.json or
// SentencePiece:
//   --tokenizer-type GPT2BPETokenizer --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt
//   --tokenizer-type HFTokenizer --vocab-file 20B_tokenizer.json
//   --tokenizer-type SPMTokenizer --vocab-file tokenizer.model
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/error.h"
#include "common/guarded_main.h"
#include "common/json_text.h"
#include "runtime/data/indexed_dataset.h"
#include "runtime/data/tokenizer.h"
#include "runtime/data/utf8.h"

namespace {

// A corpus record is a flat object with a text field, perhaps some metadata; deeper nesting is
// refused before it is parsed.
constexpr int kMaxRecordDepth = 256;

using ds::runtime::IndexedDatasetWriter;
using ds::runtime::TokenType;

struct Options {
  std::vector<std::string> inputs;
  std::string outputPrefix;
  std::vector<std::string> jsonKeys = {"text"};
  std::string format = "auto";
  std::string tokenizer = "ByteTokenizer";
  std::string vocabFile, mergeFile;
  bool appendEod = false;
};

// One progress line, redrawn in place on a terminal, at most every 200 ms.
class Progress {
 public:
  explicit Progress(uintmax_t totalBytes) : total_(totalBytes) {}
  void update(uintmax_t bytes, uint64_t documents, bool last = false) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - shown_ < std::chrono::milliseconds(200)) return;
    shown_ = now;
    if (!terminal_ && !last) return;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double percent = total_ ? 100.0 * bytes / total_ : 100.0;
    std::fprintf(stderr, "%s[%-30s] %5.1f%%  %llu documents  %.1f MB/s%s", terminal_ ? "\r" : "",
                 std::string(static_cast<size_t>(percent * 0.3), '#').c_str(), percent,
                 static_cast<unsigned long long>(documents), bytes / 1e6 / std::max(seconds, 1e-9),
                 last ? "\n" : "");
    std::fflush(stderr);
  }

 private:
  uintmax_t total_;
  bool terminal_ = isatty(STDERR_FILENO) == 1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), shown_{};
};

bool isJsonLines(const Options& o, const std::string& path) {
  if (o.format != "auto") return o.format == "jsonl";
  return path.ends_with(".jsonl") || path.ends_with(".json");
}

void addOptions(CLI::App& app, Options& o) {
  app.add_option("--input", o.inputs, "input files (text, or JSON lines)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--output-prefix,--output_prefix", o.outputPrefix,
                 "writes PREFIX_KEY_document.bin/.idx")
      ->required();
  app.add_option("--json-keys,--jsonl-keys,--json_keys", o.jsonKeys, "JSON keys to tokenize");
  app.add_option("--format", o.format, "auto (by extension), text or jsonl")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  app.add_option("--tokenizer-type,--tokenizer_type", o.tokenizer,
                 "ByteTokenizer (the default; also: byte), GPT2BPETokenizer, HFTokenizer or "
                 "SPMTokenizer");
  app.add_option("--vocab-file,--vocab_file", o.vocabFile,
                 "GPT-2's vocab.json (GPT2BPETokenizer), a tokenizer.json (HFTokenizer) or the "
                 ".model file (SPMTokenizer)");
  app.add_option("--merge-file,--merge_file", o.mergeFile, "GPT-2's merges.txt (GPT2BPETokenizer)");
  app.add_flag("--append-eod,--append_eod", o.appendEod, "end every document with the EOD token");
}

// The tokenizer and one dataset per JSON key; each document is tokenized and written as it comes.
class Datasets {
 public:
  explicit Datasets(const Options& o)
      : o_(o),
        tokenizer_(ds::runtime::makeTokenizer(o.tokenizer, o.vocabFile, o.mergeFile)),
        tokenizerType_(ds::runtime::parseTokenizerType(o.tokenizer)) {
    // NeoX's choice (best_fitting_dtype): uint16 below 65500 tokens, else int32.
    const TokenType type =
        tokenizer_->vocabularySize() < 65500 ? TokenType::UInt16 : TokenType::Int32;
    for (const auto& key : o.jsonKeys)
      writers_[key] =
          std::make_unique<IndexedDatasetWriter>(o.outputPrefix + "_" + key + "_document", type);
  }

  ds::runtime::TokenizerType tokenizerType() const { return tokenizerType_; }

  void addDocument(const std::string& key, const std::string& text) {
    const uint64_t droppedBefore = tokenizer_->droppedBytes();
    std::vector<int32_t> ids = tokenizer_->encode(text);
    droppedBytes_[key] += tokenizer_->droppedBytes() - droppedBefore;
    if (o_.appendEod) ids.push_back(tokenizer_->endOfDocument());
    writers_.at(key)->addSequence(ids);
    writers_.at(key)->endDocument();
  }

  void finish(uint64_t documents) {
    for (auto& [key, writer] : writers_) {
      writer->finish();
      // Silently missing text would train a model on less than the corpus; say how much.
      const std::string dropped = droppedBytes_[key] == 0
                                      ? ""
                                      : ", " + std::to_string(droppedBytes_[key]) +
                                            " bytes dropped (the vocabulary has no token for them)";
      std::printf("ds-preprocess: %llu documents, %llu tokens%s -> %s_%s_document.{bin,idx}\n",
                  static_cast<unsigned long long>(documents),
                  static_cast<unsigned long long>(writer->tokens()), dropped.c_str(),
                  o_.outputPrefix.c_str(), key.c_str());
    }
  }

 private:
  const Options& o_;
  std::unique_ptr<ds::runtime::Tokenizer> tokenizer_;
  ds::runtime::TokenizerType tokenizerType_;
  std::map<std::string, std::unique_ptr<IndexedDatasetWriter>> writers_;
  std::map<std::string, uint64_t> droppedBytes_;  // by key: bytes the vocabulary has no token for
};

// Input bytes read and documents written so far, across the input files.
struct Tally {
  uintmax_t doneBytes = 0;
  uint64_t documents = 0;
};

// One JSON line (`where` is FILE:LINE): a document for each key.
void addRecord(const std::string& line, const std::string& where, const Options& o,
               Datasets& datasets) {
  // As NeoX's json.loads: a repeated key keeps its last value. Records may nest (metadata), but
  // not without bound.
  const nlohmann::json record =
      ds::parseJsonText(line, where, {kMaxRecordDepth, ds::DuplicateKeys::LastWins});
  for (const auto& key : o.jsonKeys) {
    const auto it = record.is_object() ? record.find(key) : record.end();
    if (it == record.end() || !it->is_string())
      throw ds::Error(where + ": no string \"" + key + "\" (choose the field with --json-keys)");
    datasets.addDocument(key, it->get<std::string>());
  }
}

// Text input's bytes that are not UTF-8 (JSON input cannot have them: the parser refuses them).
struct InvalidUtf8 {
  uint64_t bytes = 0;
  std::string first;  // FILE:LINE:COLUMN

  void check(const std::string& line, const std::string& path, uint64_t number) {
    const auto check = ds::runtime::checkUtf8(line);
    if (check.invalidBytes > 0 && bytes == 0)
      first = path + ":" + std::to_string(number) + ":" + std::to_string(check.firstInvalid + 1);
    bytes += check.invalidBytes;
  }

  void warn(ds::runtime::TokenizerType tokenizerType) const {
    std::fprintf(stderr,
                 "ds-preprocess: warning: %s: %llu bytes are not UTF-8 (the first here); %s "
                 "(if the file has another encoding, convert it first, e.g. with iconv)\n",
                 first.c_str(), static_cast<unsigned long long>(bytes),
                 tokenizerType == ds::runtime::TokenizerType::SentencePiece
                     ? "SentencePiece reads each as U+FFFD"
                 : tokenizerType == ds::runtime::TokenizerType::Hf
                     ? "they are read as U+FFFD, as Hugging Face's library gets such text"
                     : "they are kept and tokenized as raw bytes");
  }
};

// One input file: a document per JSON line, or per paragraph of text (blank lines separate them).
void readInput(const std::string& path, const Options& o, Datasets& datasets, Progress& progress,
               Tally& tally) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ds::Error(path + ": cannot open");
  const bool jsonl = isJsonLines(o, path);
  std::string line, paragraph;
  InvalidUtf8 invalid;
  for (uint64_t number = 1; std::getline(in, line); ++number) {
    tally.doneBytes += line.size() + 1;
    const bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    if (jsonl) {
      if (blank) continue;
      addRecord(line, path + ":" + std::to_string(number), o, datasets);
      ++tally.documents;
    } else if (blank) {
      if (!paragraph.empty())
        datasets.addDocument(o.jsonKeys.front(), paragraph), ++tally.documents;
      paragraph.clear();
    } else {
      invalid.check(line, path, number);
      paragraph += line + "\n";
    }
    progress.update(tally.doneBytes, tally.documents);
  }
  if (!paragraph.empty()) datasets.addDocument(o.jsonKeys.front(), paragraph), ++tally.documents;
  if (invalid.bytes > 0) invalid.warn(datasets.tokenizerType());
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"ds-preprocess: text or JSON lines -> an mmap indexed token dataset"};
  addOptions(app, o);
  if (std::optional<int> status = ds::parseCommandLine(app, argc, argv)) return *status;
  Datasets datasets(o);
  uintmax_t totalBytes = 0;
  for (const auto& path : o.inputs) totalBytes += std::filesystem::file_size(path);
  Progress progress(totalBytes);
  Tally tally;
  for (const auto& path : o.inputs) readInput(path, o, datasets, progress, tally);
  progress.update(totalBytes, tally.documents, true);
  datasets.finish(tally.documents);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-preprocess", [&] { return run(argc, argv); });
}
