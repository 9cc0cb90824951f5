// NeoX's SPMTokenizer against Python's sentencepiece, byte for byte: encode ids and decoded text
// for two committed models (test/golden/spm_*.model) over unicode, whitespace and invalid UTF-8,
// read from test/golden/spm_tokenizer.json (test/reference/spm_reference.py wrote it; no Python
// is needed here). Also: what decode drops, NeoX's eod and merge-file rules, bad model files, and
// normalization rules (precompiled_charsmap) built by hand, valid and damaged.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/data/tokenizer.h"
#include "test/scratch_dir.h"
#include "test/spm_charsmap_builder.h"

using ds::runtime::makeTokenizer;

namespace {

const std::string kGolden = std::string(DS_SOURCE_DIR) + "/test/golden/";

std::string fromHex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

nlohmann::json golden() {
  std::ifstream in(kGolden + "spm_tokenizer.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("spm: ids and decoded text equal Python's sentencepiece on unicode and invalid UTF-8") {
  const nlohmann::json g = golden();
  REQUIRE(g["models"].size() == 2);
  for (const auto& model : g["models"]) {
    const std::string file = model["file"];
    INFO(file);
    const auto tokenizer = makeTokenizer("SPMTokenizer", kGolden + file, "");
    CHECK(tokenizer->vocabularySize() == model["vocab_size"].get<int32_t>());
    CHECK(tokenizer->endOfDocument() == model["eod"].get<int32_t>());
    REQUIRE(model["cases"].size() >= 20);
    for (const auto& c : model["cases"]) {
      INFO(c["name"].get<std::string>());
      const std::string text = fromHex(c["text"]);
      const auto ids = tokenizer->encode(text);
      CHECK(ids == c["ids"].get<std::vector<int32_t>>());
      CHECK(tokenizer->decode(ids) == fromHex(c["decoded"]));
    }
  }
}

TEST_CASE("spm: NeoX's eod is <|endoftext|>, or <unk> when the model has no such piece") {
  // LLaMA-like: no <|endoftext|> piece, so NeoX's piece_to_id falls back to <unk> (id 0).
  const auto llama = makeTokenizer("SPMTokenizer", kGolden + "spm_llama_like.model", "");
  CHECK(llama->endOfDocument() == 0);
  CHECK(llama->vocabularySize() == 1000);
  // A user-defined <|endoftext|> is one piece in text, and the eod.
  const auto eot = makeTokenizer("SPMTokenizer", kGolden + "spm_endoftext.model", "");
  CHECK(eot->endOfDocument() == 3);
  const auto ids = eot->encode("<|endoftext|>");
  REQUIRE(ids.size() == 2);  // the dummy-prefix "▁", then the piece
  CHECK(ids[1] == 3);
}

TEST_CASE("spm: encode adds no BOS or EOS, and decode drops ids outside the vocabulary") {
  const auto tokenizer = makeTokenizer("SPMTokenizer", kGolden + "spm_llama_like.model", "");
  const auto ids = tokenizer->encode("hello world");
  REQUIRE_FALSE(ids.empty());
  CHECK(ids.front() != 1);
  CHECK(ids.back() != 2);
  std::vector<int32_t> noisy = {-1, 1};  // out of range, then <s>
  noisy.insert(noisy.end(), ids.begin(), ids.end());
  noisy.insert(noisy.end(), {2, tokenizer->vocabularySize(), 1 << 30});
  CHECK(tokenizer->decode(noisy) == "hello world");
  CHECK(tokenizer->decode({}).empty());
}

TEST_CASE("spm: makeTokenizer needs vocab-file and ignores merge-file, as NeoX does") {
  CHECK_THROWS_WITH(
      makeTokenizer("SPMTokenizer", "", ""),
      Catch::Contains("SPMTokenizer needs vocab-file") && Catch::Contains("vocab-file is not set"));
  // NeoX's local_setup.yml sets GPT-2's merge file for every config, LLaMA's included.
  const auto tokenizer =
      makeTokenizer("SPMTokenizer", kGolden + "spm_llama_like.model", "data/gpt2-merges.txt");
  CHECK(tokenizer->vocabularySize() == 1000);
}

TEST_CASE("spm: a missing, unreadable or corrupt model file is refused naming the file") {
  const std::string dir = ds::test::makeScratchDir("spm-bad-model");
  const std::string model = readFile(kGolden + "spm_llama_like.model");
  REQUIRE(model.size() > 1000);
  struct Case {
    const char* name;
    std::string file;
    std::string contents;  // written unless the case is about the file's absence or kind
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing", dir + "/missing.model", "", "no such file"},
      {"a directory", dir, "", "not a regular file"},
      {"empty", dir + "/empty.model", "", "not a SentencePiece model"},
      {"truncated", dir + "/truncated.model", model.substr(0, model.size() / 2),
       "not a SentencePiece model"},
      {"a tokenizer.json", dir + "/tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}\n",
       "not a SentencePiece model"},
      {"random bytes", dir + "/random.model", std::string(4096, '\xA7'),
       "not a SentencePiece model"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    if (c.name != std::string("missing") && c.name != std::string("a directory"))
      std::ofstream(c.file, std::ios::binary) << c.contents;
    try {
      makeTokenizer("SPMTokenizer", c.file, "");
      FAIL("accepted");
    } catch (const ds::Error& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains("vocab-file " + c.file + ": " + c.message));
      CHECK_THAT(what, Catch::Contains("LLaMA's tokenizer.model"));
    }
  }
}

TEST_CASE(
    "spm: normalization rules in sentencepiece's charsmap format apply as the library reads them") {
  const std::string dir = ds::test::makeScratchDir("spm-charsmap");
  const std::string original = kGolden + "spm_llama_like.model";
  const std::string file = dir + "/rules.model";
  std::ofstream(file, std::ios::binary) << ds::test::withSpmCharsmap(
      readFile(original), ds::test::buildSpmCharsmap(ds::test::kSpmTestRules).bytes());
  const auto plain = makeTokenizer("SPMTokenizer", original, "");
  const auto withRules = makeTokenizer("SPMTokenizer", file, "");
  // "Qu" -> "KW" (the longest rule), "Q" -> "q", "é" -> "e".
  CHECK(withRules->encode("Quiet Q caf\xC3\xA9") == plain->encode("KWiet q cafe"));
  CHECK(plain->encode("Quiet Q caf\xC3\xA9") != plain->encode("KWiet q cafe"));
}

TEST_CASE("spm: damaged normalization rules are refused naming the file and the field") {
  const std::string dir = ds::test::makeScratchDir("spm-bad-charsmap");
  for (const auto& damaged :
       ds::test::damagedSpmModels(readFile(kGolden + "spm_llama_like.model"))) {
    INFO(damaged.name);
    const std::string file = dir + "/damaged.model";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged.model;
    try {
      makeTokenizer("SPMTokenizer", file, "")->encode(std::string(100, 'a') + " Quiet caf\xC3\xA9");
      FAIL_CHECK("accepted");
    } catch (const ds::Error& e) {
      const std::string what = e.what();
      CHECK_THAT(what,
                 Catch::Contains("vocab-file " + file + ": " + damaged.field + ": " + damaged.why));
      CHECK_THAT(what, Catch::Contains("the model's normalization rules are damaged"));
    }
  }
}
