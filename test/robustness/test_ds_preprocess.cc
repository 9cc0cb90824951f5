// ds-preprocess through the real binary: JSON lines and blank-line separated text become the
// documents of an indexed dataset, with the byte, GPT-2 BPE or SentencePiece tokenizer; bad input
// exits 2 naming the file and line.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/indexed_dataset.h"
#include "runtime/data/tokenizer.h"
#include "test/bpe_test_files.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"

namespace {

int runTool(const std::string& dir, const std::string& args, std::string& output) {
  const ds::test::CommandOutcome r =
      ds::test::runCommand("cd " + dir + " && " + DS_BIN_DIR + "/ds-preprocess " + args);
  output = r.output;
  return r.status;
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
  CHECK(out.find("broken.jsonl:2: invalid JSON") != std::string::npos);
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b --json-keys body", out) == 2);
  CHECK(out.find("bad.jsonl:1: no string \"body\"") != std::string::npos);
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b --tokenizer-type GPT2BPETokenizer",
                out) == 2);
  CHECK(out.find("GPT2BPETokenizer needs vocab-file") != std::string::npos);
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b --tokenizer-type HFTokenizer", out) ==
        2);
  CHECK(out.find("HFTokenizer needs vocab-file") != std::string::npos);
  CHECK(runTool(dir, "--input bad.jsonl --output-prefix o/b --tokenizer-type SPMTokenizer-x", out) ==
        2);
  CHECK(out.find("accepted: ByteTokenizer, GPT2BPETokenizer, HFTokenizer") != std::string::npos);
  std::ofstream(dir + "/vocab.json") << "{\"a\": 0}";
  std::ofstream(dir + "/merges.txt") << "";
  CHECK(runTool(dir,
                "--input bad.jsonl --output-prefix o/b --tokenizer-type GPT2BPETokenizer "
                "--vocab-file vocab.json --merge-file merges.txt",
                out) == 2);
  CHECK(out.find("vocab.json: no token for the byte 0x00") != std::string::npos);
  CHECK(runTool(dir, "--input missing.txt --output-prefix o/b", out) == 2);
  // No half-written dataset: neither the files nor their temporary names remain.
  std::error_code ec;
  for (const char* name : {"o/b_text_document.bin", "o/b_text_document.idx",
                           "o/b_text_document.bin.tmp", "o/b_body_document.bin.tmp"})
    CHECK_FALSE(std::filesystem::exists(dir + "/" + name, ec));
}

TEST_CASE("ds-preprocess: GPT2BPETokenizer from vocab and merges files, EOD from the vocabulary") {
  const std::string dir = ds::test::makeScratchDir("preprocess-bpe");
  const auto files = ds::test::writeSmallBpe(dir);
  const std::vector<std::string> documents = {"the theme of the abab", "n\\u00e9e\\n\\nx"};
  {
    std::ofstream jsonl(dir + "/c.jsonl");
    for (const auto& d : documents) jsonl << "{\"text\": \"" << d << "\"}\n";
  }
  const std::string bpe = " --tokenizer-type GPT2BPETokenizer --vocab-file " + files.vocabFile +
                          " --merge-file " + files.mergeFile;
  std::string out;
  REQUIRE(runTool(dir, "--input c.jsonl --output-prefix data/b --append-eod" + bpe, out) == 0);
  const ds::runtime::IndexedDataset data(dir + "/data/b_text_document");
  CHECK(data.type() == ds::runtime::TokenType::UInt16);
  REQUIRE(data.documents() == 2);
  const ds::runtime::BpeTokenizer tokenizer(files.vocabFile, files.mergeFile);
  const std::vector<std::string> texts = {"the theme of the abab",
                                          "n\xC3\xA9"
                                          "e\n\nx"};
  for (size_t i = 0; i < texts.size(); ++i) {
    auto expected = tokenizer.encode(texts[i]);
    expected.push_back(files.ids.at("<|endoftext|>"));
    CHECK(data.read(i) == expected);
  }
  CHECK(data.read(0)[2] == files.ids.at(" the"));  // "t" "he" " the" "m" "e" ...

  // Text that is not UTF-8: warned about with its place, kept byte for byte.
  std::ofstream(dir + "/latin1.txt", std::ios::binary) << "ok\ncaf\xE9 au lait\n";
  REQUIRE(runTool(dir, "--input latin1.txt --output-prefix data/l" + bpe, out) == 0);
  CHECK(out.find("warning: latin1.txt:2:4: 1 bytes are not UTF-8") != std::string::npos);
  const ds::runtime::IndexedDataset latin1(dir + "/data/l_text_document");
  CHECK(tokenizer.decode(latin1.read(0)) == "ok\ncaf\xE9 au lait\n");
}

TEST_CASE("ds-preprocess: SPMTokenizer from a .model file, ids inside its vocabulary") {
  const std::string dir = ds::test::makeScratchDir("preprocess-spm");
  const std::string model = std::string(DS_SOURCE_DIR) + "/test/golden/spm_llama_like.model";
  std::ofstream(dir + "/c.jsonl") << "{\"text\": \"Hello  world\\n\"}\n{\"text\": \"\\u6df1\\u5ea6 "
                                     "\\ud83d\\ude80 caf\\u00e9\"}\n"
                                  << "{\"text\": \"\"}\n";
  std::string out;
  // merge-file is ignored, as NeoX ignores it for SentencePiece.
  REQUIRE(runTool(dir,
                  "--input c.jsonl --output-prefix data/s --append-eod --tokenizer-type "
                  "SPMTokenizer --vocab-file " +
                      model + " --merge-file gpt2-merges.txt",
                  out) == 0);
  const ds::runtime::IndexedDataset data(dir + "/data/s_text_document");
  CHECK(data.type() == ds::runtime::TokenType::UInt16);
  REQUIRE(data.documents() == 3);
  const auto tokenizer = ds::runtime::makeTokenizer("SPMTokenizer", model, "");
  const std::vector<std::string> texts = {
      "Hello  world\n", "\xE6\xB7\xB1\xE5\xBA\xA6 \xF0\x9F\x9A\x80 caf\xC3\xA9", ""};
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(i);
    const auto ids = data.read(i);
    auto expected = tokenizer->encode(texts[i]);
    expected.push_back(tokenizer->endOfDocument());  // <unk> (0): the model has no <|endoftext|>
    CHECK(ids == expected);
    for (int32_t id : ids) CHECK((id >= 0 && id < tokenizer->vocabularySize()));
  }
  CHECK(data.read(2) == std::vector<int32_t>{0});

  std::ofstream(dir + "/latin1.txt", std::ios::binary) << "caf\xE9 au lait\n";
  REQUIRE(runTool(dir,
                  "--input latin1.txt --output-prefix data/l --tokenizer-type SPMTokenizer "
                  "--vocab-file " +
                      model,
                  out) == 0);
  CHECK(out.find("latin1.txt:1:4: 1 bytes are not UTF-8 (the first here); SentencePiece reads "
                 "each as U+FFFD") != std::string::npos);
  const ds::runtime::IndexedDataset latin1(dir + "/data/l_text_document");
  CHECK(tokenizer->decode(latin1.read(0)) == "caf\xEF\xBF\xBD au lait\n");

  std::ofstream(dir + "/vocab.json") << "{\"a\": 0}";
  CHECK(runTool(dir,
                "--input c.jsonl --output-prefix o/s --tokenizer-type SPMTokenizer "
                "--vocab-file vocab.json",
                out) == 2);
  CHECK(out.find("vocab-file vocab.json: not a SentencePiece model") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/o/s_text_document.bin"));
}
