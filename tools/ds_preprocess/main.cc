// ds-preprocess: text or JSON-lines in, an mmap indexed dataset out (PREFIX_KEY_document.bin/.idx,
// GPT-NeoX's layout and names), with a progress line. Like NeoX's tools/preprocess_data.py:
//   ds-preprocess --input corpus.jsonl --json-keys text --output-prefix data/corpus --append-eod
// Text input (any file not ending in .jsonl/.json, or --format text): documents are separated by
// blank lines. The tokenizer is byte-level (the GPT-2 BPE tokenizer is not implemented yet).
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

#include "common/error.h"
#include "common/guarded_main.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/indexed_dataset.h"

namespace {

using ds::runtime::ByteTokenizer;
using ds::runtime::IndexedDatasetWriter;
using ds::runtime::TokenType;

struct Options {
  std::vector<std::string> inputs;
  std::string outputPrefix;
  std::vector<std::string> jsonKeys = {"text"};
  std::string format = "auto";
  std::string tokenizer = "byte";
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

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"ds-preprocess: text or JSON lines -> an mmap indexed token dataset"};
  app.add_option("--input", o.inputs, "input files (text, or JSON lines)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--output-prefix,--output_prefix", o.outputPrefix,
                 "writes PREFIX_KEY_document.bin/.idx")
      ->required();
  app.add_option("--json-keys,--jsonl-keys,--json_keys", o.jsonKeys, "JSON keys to tokenize");
  app.add_option("--format", o.format, "auto (by extension), text or jsonl")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  app.add_option("--tokenizer-type,--tokenizer_type", o.tokenizer, "byte (the default)");
  app.add_flag("--append-eod,--append_eod", o.appendEod, "end every document with the EOD token");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (o.tokenizer != "byte" && o.tokenizer != "ByteLevelTokenizer")
    throw ds::Error("--tokenizer-type " + o.tokenizer +
                    ": only the byte-level tokenizer is implemented so far (use byte)");

  const ByteTokenizer tokenizer;
  std::map<std::string, std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const auto& key : o.jsonKeys)
    writers[key] = std::make_unique<IndexedDatasetWriter>(o.outputPrefix + "_" + key + "_document",
                                                          TokenType::UInt16);
  uintmax_t totalBytes = 0, doneBytes = 0;
  for (const auto& path : o.inputs) totalBytes += std::filesystem::file_size(path);
  Progress progress(totalBytes);
  uint64_t documents = 0;
  auto addDocument = [&](const std::string& key, const std::string& text) {
    std::vector<int32_t> ids = tokenizer.encode(text);
    if (o.appendEod) ids.push_back(ByteTokenizer::kEndOfDocument);
    writers.at(key)->addSequence(ids);
    writers.at(key)->endDocument();
  };
  for (const auto& path : o.inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ds::Error(path + ": cannot open");
    const bool jsonl = isJsonLines(o, path);
    std::string line, paragraph;
    for (uint64_t number = 1; std::getline(in, line); ++number) {
      doneBytes += line.size() + 1;
      if (jsonl) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json record;
        try {
          record = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
          throw ds::Error(path + ":" + std::to_string(number) + ": not a JSON object: " + e.what());
        }
        for (const auto& key : o.jsonKeys) {
          const auto it = record.is_object() ? record.find(key) : record.end();
          if (it == record.end() || !it->is_string())
            throw ds::Error(path + ":" + std::to_string(number) + ": no string \"" + key +
                            "\" (choose the field with --json-keys)");
          addDocument(key, it->get<std::string>());
        }
        ++documents;
      } else if (line.find_first_not_of(" \t\r") == std::string::npos) {
        if (!paragraph.empty()) addDocument(o.jsonKeys.front(), paragraph), ++documents;
        paragraph.clear();
      } else {
        paragraph += line + "\n";
      }
      progress.update(doneBytes, documents);
    }
    if (!paragraph.empty()) addDocument(o.jsonKeys.front(), paragraph), ++documents;
  }
  progress.update(totalBytes, documents, true);
  for (auto& [key, writer] : writers) {
    writer->finish();
    std::printf("ds-preprocess: %llu documents, %llu tokens -> %s_%s_document.{bin,idx}\n",
                static_cast<unsigned long long>(documents),
                static_cast<unsigned long long>(writer->tokens()), o.outputPrefix.c_str(),
                key.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-preprocess", [&] { return run(argc, argv); });
}
