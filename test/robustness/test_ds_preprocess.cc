// ds-preprocess through the real binary: JSON lines and blank-line separated text become the
// documents of an indexed dataset, with the byte, GPT-2 BPE, tokenizer.json or SentencePiece
// tokenizer; bad input (a corpus line, a damaged tokenizer file) exits 2 naming the file and line
// or field.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/indexed_dataset.h"
#include "runtime/data/tokenizer.h"
#include "test/bpe_test_files.h"
#include "test/hf_test_files.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"
#include "test/spm_charsmap_builder.h"

namespace {

// `timeoutSeconds` > 0: killed after that long (status 124, timeout(1)'s).
int runTool(const std::string& dir, const std::string& args, std::string& output,
            int timeoutSeconds = 0) {
  const std::string timeout =
      timeoutSeconds > 0 ? "timeout " + std::to_string(timeoutSeconds) + " " : "";
  const ds::test::CommandOutcome r =
      ds::test::runCommand("cd " + dir + " && " + timeout + DS_BIN_DIR + "/ds-preprocess " + args);
  output = r.output;
  return r.status;
}

// Writes DIR/NAME; returns NAME, as ds-preprocess (run in DIR) is given it.
std::string writeTokenizerJson(const std::string& dir, const std::string& name,
                               const nlohmann::json& doc) {
  std::ofstream(dir + "/" + name, std::ios::binary | std::ios::trunc) << doc.dump(1);
  return name;
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

TEST_CASE("ds-preprocess: a SentencePiece model with damaged normalization rules exits 2") {
  const std::string dir = ds::test::makeScratchDir("preprocess-spm-charsmap");
  std::ifstream in(std::string(DS_SOURCE_DIR) + "/test/golden/spm_llama_like.model",
                   std::ios::binary);
  const std::string model{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  REQUIRE(model.size() > 1000);
  // Long runs of one byte and every rule's text: what makes a damaged trie read past its end.
  std::ofstream(dir + "/c.jsonl") << "{\"text\": \"" << std::string(200, 'a')
                                  << " Quiet Q caf\\u00e9\"}\n";
  const std::string spm = "--input c.jsonl --output-prefix data/s --tokenizer-type SPMTokenizer";
  std::string out;
  for (const auto& damaged : ds::test::damagedSpmModels(model)) {
    INFO(damaged.name);
    std::ofstream(dir + "/damaged.model", std::ios::binary | std::ios::trunc) << damaged.model;
    CHECK(runTool(dir, spm + " --vocab-file damaged.model", out) == 2);
    INFO(out);
    CHECK(out.find("vocab-file damaged.model: " + damaged.field + ": " + damaged.why) !=
          std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir + "/data/s_text_document.bin"));
  }
  // Valid rules are taken, and applied: the ids are those of the text the rules make.
  std::ofstream(dir + "/rules.model", std::ios::binary) << ds::test::withSpmCharsmap(
      model, ds::test::buildSpmCharsmap(ds::test::kSpmTestRules).bytes());
  REQUIRE(runTool(dir, spm + " --vocab-file rules.model", out) == 0);
  const ds::runtime::IndexedDataset data(dir + "/data/s_text_document");
  REQUIRE(data.documents() == 1);
  const auto tokenizer = ds::runtime::makeTokenizer(
      "SPMTokenizer", std::string(DS_SOURCE_DIR) + "/test/golden/spm_llama_like.model", "");
  CHECK(data.read(0) == tokenizer->encode(std::string(200, 'a') + " KWiet q cafe"));
}

TEST_CASE("ds-preprocess: tokenizer.json files that would misencode exit 2 naming token and id") {
  const std::string dir = ds::test::makeScratchDir("preprocess-hf-refused");
  std::ofstream(dir + "/c.jsonl") << "{\"text\": \"hello\"}\n{\"text\": \"world\"}\n";
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> change;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"an id near the cap", [](nlohmann::json& d) { d["model"]["vocab"]["zz"] = (1 << 24) - 1; },
       "model.vocab: token \"zz\": id 16777215 is far beyond the 288 tokens the file defines"},
      {"an added id near the cap", [](nlohmann::json& d) { d["added_tokens"][1]["id"] = 16777000; },
       "added_tokens[1].id: token \"<|padding|>\": id 16777000 is far beyond"},
      {"an empty vocabulary",
       [](nlohmann::json& d) {
         d["model"]["vocab"] = nlohmann::json::object();
         d["model"]["merges"] = nlohmann::json::array();
       },
       "model.vocab: is empty"},
      {"two added tokens at one id", [](nlohmann::json& d) { d["added_tokens"][1]["id"] = 0; },
       "added_tokens[1].id: id 0 is also the id of added_tokens[0] \"<|endoftext|>\""},
      {"one added token at two ids",
       [](nlohmann::json& d) {
         d["added_tokens"].push_back(
             {{"id", 600}, {"content", "<|endoftext|>"}, {"special", true}});
       },
       "added_tokens[25].content: \"<|endoftext|>\" has id 600 here and 0 at added_tokens[0]"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    nlohmann::json doc = ds::test::pythiaStyle();
    c.change(doc);
    const std::string file = writeTokenizerJson(dir, "tokenizer.json", doc);
    std::string out;
    CHECK(runTool(dir,
                  "--input c.jsonl --output-prefix data/h --tokenizer-type HFTokenizer "
                  "--vocab-file " +
                      file,
                  out) == 2);
    INFO(out);
    CHECK(out.find("tokenizer.json: " + std::string(c.message)) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir + "/data/h_text_document.bin"));
  }
}

TEST_CASE("ds-preprocess: bytes a tokenizer.json has no token for are counted in the summary") {
  const std::string dir = ds::test::makeScratchDir("preprocess-hf-dropped");
  nlohmann::json doc = ds::test::pythiaStyle();
  for (const char* letter : {"z", "q"}) doc["model"]["vocab"].erase(letter);
  const std::string hf = " --tokenizer-type HFTokenizer --vocab-file " +
                         writeTokenizerJson(dir, "tokenizer.json", doc);
  std::ofstream(dir + "/c.jsonl") << "{\"text\": \"zaq\", \"title\": \"ok\"}\n"
                                     "{\"text\": \"jazz\", \"title\": \"quiz\"}\n";
  std::string out;
  REQUIRE(runTool(dir, "--input c.jsonl --output-prefix data/h --json-keys text title" + hf, out) ==
          0);
  CHECK(out.find("2 documents, 3 tokens, 4 bytes dropped (the vocabulary has no token for them) "
                 "-> data/h_text_document.{bin,idx}") != std::string::npos);
  CHECK(out.find("2 documents, 4 tokens, 2 bytes dropped (the vocabulary has no token for them) "
                 "-> data/h_title_document.{bin,idx}") != std::string::npos);
  // With every byte a token, nothing is dropped and the line says nothing about it.
  REQUIRE(runTool(dir, "--input c.jsonl --output-prefix data/b", out) == 0);
  CHECK(out.find("2 documents, 7 tokens -> data/b_text_document.{bin,idx}") != std::string::npos);
}

TEST_CASE("ds-preprocess: a tokenizer.json with 50000 added tokens loads in seconds") {
  const std::string dir = ds::test::makeScratchDir("preprocess-hf-added");
  nlohmann::json doc = ds::test::pythiaStyle();
  const int32_t first = 2 + 256 + 4 + 23;
  for (int n = 0; n < 50000; ++n)
    doc["added_tokens"].push_back({{"id", first + n},
                                   {"content", "<t" + std::to_string(n)},
                                   {"special", false},
                                   {"normalized", false}});
  const std::string hf = " --tokenizer-type HFTokenizer --vocab-file " +
                         writeTokenizerJson(dir, "tokenizer.json", doc);
  std::ofstream(dir + "/c.jsonl") << "{\"text\": \"<t12345<t1<t49999\"}\n";
  std::string out;
  // Loading once sorted a first-byte bucket at every insert: 130 s for these 50,000 tokens, and
  // well under a second since. The bound is generous, for a loaded machine.
  REQUIRE(runTool(dir, "--input c.jsonl --output-prefix data/h" + hf, out, 30) == 0);
  const ds::runtime::IndexedDataset data(dir + "/data/h_text_document");
  REQUIRE(data.documents() == 1);
  CHECK(data.read(0) == std::vector<int32_t>{first + 12345, first + 1, first + 49999});
}
