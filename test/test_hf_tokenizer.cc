// HFTokenizer (runtime/data/hf_tokenizer.h) against Hugging Face's own `tokenizers` library: ids,
// decoded text and vocabulary size from test/golden/hf_tokenizer_ids.json, which
// test/reference/hf_tokenizer_reference.js wrote with the library on test/golden/hf_tokenizer.json
// and variants derived from it the same way here. Plus a pythia-format file (test/hf_test_files.h)
// and the refusals, dropped bytes counted, and 50,000 added tokens.
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
#include "test/hf_test_files.h"
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

using ds::test::pythiaStyle;

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

TEST_CASE("hf tokenizer: 50000 added tokens load, and each is matched longest first") {
  // All in one first-byte bucket, some prefixes of others: "<t1", "<t12", "<t123", ...
  Json doc = pythiaStyle();
  int32_t next = 2 + 256 + 4 + 23;
  const int32_t first = next;
  for (int n = 0; n < 50000; ++n)
    doc["added_tokens"].push_back({{"id", next++},
                                   {"content", "<t" + std::to_string(n)},
                                   {"special", false},
                                   {"normalized", false}});
  const std::string dir = ds::test::makeScratchDir("hf_many_added");
  const HfTokenizer tok(writeJson(dir, "tokenizer.json", doc));
  CHECK(tok.vocabularySize() == next);
  CHECK(tok.encode("<t12345<t1<t49999") ==
        std::vector<int32_t>{first + 12345, first + 1, first + 49999});
  CHECK(tok.decode({first + 7, first + 42}) == "<t7<t42");
}

TEST_CASE("hf tokenizer: ids far beyond the tokens of the file are refused naming token and id") {
  const std::string dir = ds::test::makeScratchDir("hf_far_ids");
  const int32_t defined = 2 + 256 + 4 + 2 + 23;  // model.vocab and added_tokens
  // A hole of a few hundred ids is taken: ids are dense in real files, but not always gapless.
  Json holes = pythiaStyle();
  holes["model"]["vocab"]["zz"] = defined + 500;
  CHECK(HfTokenizer(writeJson(dir, "holes.json", holes)).vocabularySize() == defined + 501);

  Json farVocab = pythiaStyle();
  farVocab["model"]["vocab"]["zz"] = (1 << 24) - 1;
  const std::string vocabPath = writeJson(dir, "far_vocab.json", farVocab);
  CHECK_THROWS_WITH(HfTokenizer(vocabPath),
                    Catch::Contains(vocabPath +
                                    ": model.vocab: token \"zz\": id 16777215 is far "
                                    "beyond the " +
                                    std::to_string(defined + 1) + " tokens the file defines"));
  Json farAdded = pythiaStyle();
  farAdded["added_tokens"][5]["id"] = 16000000;
  const std::string addedPath = writeJson(dir, "far_added.json", farAdded);
  CHECK_THROWS_WITH(HfTokenizer(addedPath),
                    Catch::Contains(addedPath + ": added_tokens[5].id: token \"" +
                                    std::string(21, ' ') + "\": id 16000000 is far beyond"));
}

TEST_CASE("hf tokenizer: an empty model.vocab is refused, and bytes without a token are counted") {
  const std::string dir = ds::test::makeScratchDir("hf_empty_vocab");
  Json empty = pythiaStyle();
  empty["model"]["vocab"] = Json::object();
  empty["model"]["merges"] = Json::array();
  const std::string emptyPath = writeJson(dir, "empty.json", empty);
  CHECK_THROWS_WITH(HfTokenizer(emptyPath),
                    Catch::Contains(emptyPath + ": model.vocab: is empty, so every byte"));

  Json noZ = pythiaStyle();
  noZ["model"]["vocab"].erase("z");
  const HfTokenizer tok(writeJson(dir, "no_z.json", noZ));
  CHECK(tok.droppedBytes() == 0);
  CHECK(tok.encode("zaz") == std::vector<int32_t>{2 + 'a'});
  CHECK(tok.droppedBytes() == 2);
  CHECK(tok.encode("zaz") == std::vector<int32_t>{2 + 'a'});  // from the word cache: still counted
  CHECK(tok.droppedBytes() == 4);
  CHECK(HfTokenizer(kGoldenDir + "/hf_tokenizer.json").droppedBytes() == 0);
}

TEST_CASE("hf tokenizer: added tokens sharing an id, or one token at two ids, are refused") {
  const std::string dir = ds::test::makeScratchDir("hf_added_conflicts");
  Json sameId = pythiaStyle();
  sameId["added_tokens"][1]["id"] = 0;
  const std::string sameIdPath = writeJson(dir, "same_id.json", sameId);
  CHECK_THROWS_WITH(HfTokenizer(sameIdPath),
                    Catch::Contains(sameIdPath + ": added_tokens[1].id: id 0 is also the id of "
                                                 "added_tokens[0] \"<|endoftext|>\""));
  // The end of document would be 600 while "<|endoftext|>" in text encodes to 0.
  Json twoIds = pythiaStyle();
  twoIds["added_tokens"].push_back({{"id", 600}, {"content", "<|endoftext|>"}, {"special", true}});
  const std::string twoIdsPath = writeJson(dir, "two_ids.json", twoIds);
  CHECK_THROWS_WITH(HfTokenizer(twoIdsPath),
                    Catch::Contains(twoIdsPath + ": added_tokens[25].content: \"<|endoftext|>\" "
                                                 "has id 600 here and 0 at added_tokens[0]"));
  // The same token twice is one token.
  Json repeated = pythiaStyle();
  repeated["added_tokens"].push_back(repeated["added_tokens"][0]);
  const HfTokenizer tok(writeJson(dir, "repeated.json", repeated));
  CHECK(tok.endOfDocument() == 0);
  CHECK(tok.encode("<|endoftext|>") == std::vector<int32_t>{0});
}
