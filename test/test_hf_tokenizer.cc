// HFTokenizer (runtime/data/hf_tokenizer.h) against Hugging Face's own `tokenizers` library: ids,
// decoded text and vocabulary size from test/golden/hf_tokenizer_ids.json, which
// test/reference/hf_tokenizer_reference.js wrote with the library on test/golden/hf_tokenizer.json
// and variants derived from it the same way here. Plus a pythia-format file and the refusals.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/tokenizer.h"
#include "runtime/data/unicode_normalization.h"
#include "runtime/data/utf8.h"
#include "test/bpe_test_files.h"
#include "test/scratch_dir.h"

using ds::runtime::HfTokenizer;
using Json = nlohmann::json;

namespace {

const std::string kGoldenDir = std::string(DS_SOURCE_DIR) + "/test/golden";

Json readJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return Json::parse(in);
}

std::string writeJson(const std::string& dir, const std::string& name, const Json& doc) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << doc.dump(1);
  return path;
}

std::string fromHex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

// The variants of the reference script, derived from the committed file the same way.
Json variant(const std::string& name, Json doc) {
  if (name == "string_merges") {
    for (auto& m : doc["model"]["merges"])
      if (m.is_array()) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  } else if (name == "prefix_space") {
    doc["pre_tokenizer"]["add_prefix_space"] = true;
  } else if (name == "merge_order") {
    doc["added_tokens"] = Json::array({doc["added_tokens"][0]});
    doc["model"]["vocab"] = {{"<|endoftext|>", 0}, {"a", 1}, {"b", 2},
                             {"ab", 3}, {"aba", 4}, {"\xC4\xA0", 5}};
    doc["model"]["merges"] = Json::array({Json::array({"ab", "a"}), Json::array({"a", "b"})});
  } else {
    REQUIRE(name == "main");
  }
  return doc;
}

std::vector<int32_t> idsOf(const Json& list) { return list.get<std::vector<int32_t>>(); }

}  // namespace

TEST_CASE("hf tokenizer: ids and decoded text equal Hugging Face's library, byte for byte") {
  const Json golden = readJson(kGoldenDir + "/hf_tokenizer_ids.json");
  const Json committed = readJson(kGoldenDir + "/hf_tokenizer.json");
  const std::string dir = ds::test::makeScratchDir("hf_golden");
  REQUIRE(golden["variants"].size() == 4);
  for (const auto& [name, expected] : golden["variants"].items()) {
    const HfTokenizer tok(writeJson(dir, name + ".json", variant(name, committed)));
    CAPTURE(name);
    CHECK(tok.vocabularySize() == expected["vocab_size"].get<int32_t>());
    CHECK(tok.endOfDocument() == expected["eod"].get<int32_t>());
    for (const Json& c : expected["encode"]) {
      CAPTURE(c["name"].get<std::string>());
      const std::vector<int32_t> ids = tok.encode(fromHex(c["text_hex"]));
      CHECK(ids == idsOf(c["ids"]));
      CHECK(tok.decode(ids) == fromHex(c["decoded_hex"]));
    }
    for (const Json& c : expected["decode"]) {
      CAPTURE(c["name"].get<std::string>());
      CHECK(tok.decode(idsOf(c["ids"])) == fromHex(c["decoded_hex"]));
    }
  }
}

TEST_CASE("hf tokenizer: decode(encode(x)) is NFC(x) for text the vocabulary covers") {
  const HfTokenizer tok(kGoldenDir + "/hf_tokenizer.json");
  const std::string decomposed = "e\xCC\x81t\xC3\xA9 No\xC3\xABl 日本語のテキスト 🙂 👍🏽";
  CHECK(ds::runtime::normalizeNfc(decomposed) != decomposed);
  CHECK(tok.decode(tok.encode(decomposed)) == ds::runtime::normalizeNfc(decomposed));
  const std::string code = "    if (x) {\n\t\treturn y;\n    }\n";
  CHECK(tok.decode(tok.encode(code)) == code);
  CHECK(tok.encode("").empty());
  // The end of document is one id, never split.
  CHECK(tok.encode("<|endoftext|>") == std::vector<int32_t>{tok.endOfDocument()});
}

TEST_CASE("hf tokenizer: invalid UTF-8 becomes U+FFFD per maximal subpart") {
  using ds::runtime::replaceInvalidUtf8;
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(replaceInvalidUtf8("ok \xC3\xA9") == "ok \xC3\xA9");
  CHECK(replaceInvalidUtf8("a\xFF"
                           "b") == "a" + fffd + "b");
  // A truncated sequence is one subpart; a byte that cannot continue it starts afresh.
  CHECK(replaceInvalidUtf8("\xE2\x82"
                           "A\xE2\x82") == fffd + "A" + fffd);
  CHECK(replaceInvalidUtf8("\xF0\x9F\x99") == fffd);
  // Overlong, surrogate and out-of-range lead bytes allow no continuation: one each byte.
  CHECK(replaceInvalidUtf8("\xC0\xAF") == fffd + fffd);
  CHECK(replaceInvalidUtf8("\xED\xA0\x80") == fffd + fffd + fffd);
  CHECK(replaceInvalidUtf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);
}

namespace {

// A file laid out as pythia's and NeoX-20B's 20B_tokenizer.json is (that file cannot be fetched
// here; the layout is written from its published format): "1.0", added tokens with every field,
// the specials at ids 0 and 1 also in the model's vocabulary, runs of spaces as non-special
// added tokens after the model's ids, merges as "a b" strings, every byte a token.
Json pythiaStyle() {
  Json vocab = Json::object();
  vocab["<|endoftext|>"] = 0;
  vocab["<|padding|>"] = 1;
  int next = 2;
  for (int b = 0; b < 256; ++b) vocab[ds::test::gpt2Char(static_cast<unsigned char>(b))] = next++;
  const std::vector<std::string> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "\xC4\xA0 \xC4\xA0"};
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    vocab[m.substr(0, space) + m.substr(space + 1)] = next++;
  }
  const auto added = [](int id, const std::string& content, bool special, bool normalized) {
    return Json{{"id", id},           {"special", special}, {"content", content},
                {"single_word", false}, {"lstrip", false},   {"rstrip", false},
                {"normalized", normalized}};
  };
  Json addedTokens = Json::array({added(0, "<|endoftext|>", true, false),
                                  added(1, "<|padding|>", true, false)});
  for (int spaces = 24; spaces >= 2; --spaces)
    addedTokens.push_back(added(next++, std::string(static_cast<size_t>(spaces), ' '), false, true));
  const Json byteLevel = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", addedTokens},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", byteLevel},
          {"post_processor", byteLevel},
          {"decoder", byteLevel},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace

TEST_CASE("hf tokenizer: a pythia-format tokenizer.json loads through makeTokenizer") {
  const std::string dir = ds::test::makeScratchDir("hf_pythia");
  const std::string path = writeJson(dir, "20B_tokenizer.json", pythiaStyle());
  // NeoX's HFTokenizer reads vocab-file only; a merge-file from another config is not read.
  const auto tok = ds::runtime::makeTokenizer("HFTokenizer", path, "/nonexistent/merges.txt");
  CHECK(tok->endOfDocument() == 0);
  CHECK(tok->vocabularySize() == 2 + 256 + 4 + 23);
  const int32_t id2Spaces = 2 + 256 + 4 + 22, id24Spaces = 2 + 256 + 4;
  const int32_t heId = 2 + 256 + 1, theId = 2 + 256 + 2;  // "he", "Ġthe"
  // 26 spaces: the longest added token first (24), then the 2-space one.
  const std::vector<int32_t> ids = tok->encode("a" + std::string(26, ' ') + "the the");
  CHECK(ids == std::vector<int32_t>{2 + 'a', id24Spaces, id2Spaces, 2 + 't', heId, theId});
  CHECK(tok->decode(ids) == "a" + std::string(26, ' ') + "the the");
  CHECK(tok->decode({0, 2 + 'x', 1}) == "x");
}

TEST_CASE("hf tokenizer: what it does not implement is refused naming the file and the field") {
  const std::string dir = ds::test::makeScratchDir("hf_refused");
  struct Case {
    const char* field;
    std::function<void(Json&)> change;
  };
  const std::vector<Case> cases = {
      {"model.type", [](Json& d) { d["model"]["type"] = "WordPiece"; }},
      {"normalizer.type", [](Json& d) { d["normalizer"] = {{"type", "NFKC"}}; }},
      {"pre_tokenizer.type", [](Json& d) { d["pre_tokenizer"] = {{"type", "Whitespace"}}; }},
      {"post_processor.type",
       [](Json& d) { d["post_processor"] = {{"type", "TemplateProcessing"}}; }},
      {"decoder.type", [](Json& d) { d["decoder"] = {{"type", "WordPiece"}}; }},
      {"truncation", [](Json& d) { d["truncation"] = {{"max_length", 8}}; }},
      {"padding", [](Json& d) { d["padding"] = {{"length", 8}}; }},
      {"added_tokens[2].lstrip", [](Json& d) { d["added_tokens"][2]["lstrip"] = true; }},
      {"model.dropout", [](Json& d) { d["model"]["dropout"] = 0.1; }},
      {"model.ignore_merges", [](Json& d) { d["model"]["ignore_merges"] = true; }},
      {"model.merges[1]", [](Json& d) { d["model"]["merges"][1] = "\xC4\xA0t"; }},
      {"the top level.extra", [](Json& d) { d["extra"] = 1; }},
      {"<|endoftext|>", [](Json& d) {
         d["added_tokens"].erase(0);
         d["model"]["vocab"].erase("<|endoftext|>");
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.field);
    Json doc = pythiaStyle();
    c.change(doc);
    const std::string path = writeJson(dir, "tokenizer.json", doc);
    CHECK_THROWS_WITH(HfTokenizer(path), Catch::Contains(path) && Catch::Contains(c.field));
  }
  CHECK_THROWS_WITH(ds::runtime::makeTokenizer("HFTokenizer", "", ""),
                    Catch::Contains("HFTokenizer needs vocab-file"));
}
