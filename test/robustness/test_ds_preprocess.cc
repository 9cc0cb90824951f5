// ds-preprocess through the real binary: JSON lines and blank-line separated text become the
// documents of an indexed dataset; bad input exits 2 naming the file and line.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/indexed_dataset.h"
#include "test/scratch_dir.h"

namespace {

int runTool(const std::string& dir, const std::string& args, std::string& output) {
  FILE* pipe =
      popen(("cd " + dir + " && " + DS_BIN_DIR + "/ds-preprocess " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  output.clear();
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int raw = pclose(pipe);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

}  // namespace

TEST_CASE("ds-preprocess: JSON lines and text paragraphs become documents") {
  const std::string dir = ds::test::makeScratchDir("preprocess");
  std::ofstream(dir + "/c.jsonl")
      << "{\"text\": \"hello\", \"meta\": 1}\n\n{\"text\": \"n\\u00e9e\"}\n";
  std::ofstream(dir + "/c.txt") << "first para\nline two\n\n\nsecond\n";
  std::string out;
  REQUIRE(runTool(dir, "--input c.jsonl --output-prefix data/j --append-eod", out) == 0);
  CHECK(out.find("2 documents, 11 tokens -> data/j_text_document.{bin,idx}") != std::string::npos);
  const ds::runtime::IndexedDataset json(dir + "/data/j_text_document");
  CHECK(json.documents() == 2);
  const ds::runtime::ByteTokenizer tokenizer;
  auto first = json.read(0);
  CHECK(first.back() == ds::runtime::ByteTokenizer::kEndOfDocument);
  first.pop_back();
  CHECK(tokenizer.decode(first) == "hello");
  CHECK(tokenizer.decode(json.read(1)) ==
        "n\xc3\xa9"
        "e");

  REQUIRE(runTool(dir, "--input c.txt --output-prefix data/t", out) == 0);
  const ds::runtime::IndexedDataset text(dir + "/data/t_text_document");
  CHECK(text.documents() == 2);
  CHECK(tokenizer.decode(text.read(0)) == "first para\nline two\n");
  CHECK(tokenizer.decode(text.read(1)) == "second\n");
}

TEST_CASE("ds-preprocess: bad input exits 2 naming the file and line, and writes nothing") {
  const std::string dir = ds::test::makeScratchDir("preprocess-bad");
  std::ofstream(dir + "/bad.jsonl") << "{\"text\": \"ok\"}\n{\"text\": 3}\n";
  std::ofstream(dir + "/broken.jsonl") << "{\"text\": \"ok\"}\n{\"text\": \n";
  std::string out;
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b", out) == 2);
  CHECK(out.find("bad.jsonl:2: no string \"text\"") != std::string::npos);
  CHECK(runTool(dir, "--input broken.jsonl --output-prefix o/b", out) == 2);
  CHECK(out.find("broken.jsonl:2: not a JSON object") != std::string::npos);
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b --json-keys body", out) == 2);
  CHECK(out.find("bad.jsonl:1: no string \"body\"") != std::string::npos);
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b --tokenizer-type GPT2BPETokenizer",
                out) == 2);
  CHECK(out.find("only the byte-level tokenizer") != std::string::npos);
  CHECK(runTool(dir, "--input missing.txt --output-prefix o/b", out) == 2);
  // No half-written dataset: neither the files nor their temporary names remain.
  std::error_code ec;
  for (const char* name : {"o/b_text_document.bin", "o/b_text_document.idx",
                           "o/b_text_document.bin.tmp", "o/b_body_document.bin.tmp"})
    CHECK_FALSE(std::filesystem::exists(dir + "/" + name, ec));
}
