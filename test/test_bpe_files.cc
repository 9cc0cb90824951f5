// Bad GPT-2 vocabulary and merges files are refused with the file, the line or token, and the
// fix; tokenizer-type names and the files they need are checked once, in makeTokenizer.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/tokenizer.h"
#include "test/bpe_test_files.h"
#include "test/scratch_dir.h"

using ds::runtime::BpeTokenizer;
using ds::runtime::makeTokenizer;

namespace {

// A vocab.json with every byte (ids 0..255 in byte order) and <|endoftext|> unless left out,
// then `extra` entries ("\"token\": id" text, already in GPT-2's alphabet).
std::string byteVocabulary(const std::string& extra, bool withEndOfText = true, int skipByte = -1) {
  std::string json = "{";
  for (int b = 0; b < 256; ++b) {
    if (b == skipByte) continue;
    std::string key = ds::test::gpt2Char(static_cast<unsigned char>(b));
    if (key == "\"" || key == "\\") key = "\\" + key;
    json += "\"" + key + "\": " + std::to_string(b) + ", ";
  }
  if (withEndOfText) json += "\"<|endoftext|>\": 256, ";
  json += extra;
  if (json.ends_with(", ")) json.resize(json.size() - 2);
  return json + "}";
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("bpe files: a bad vocab.json is refused naming the file and the token") {
  const std::string dir = ds::test::makeScratchDir("bpe-bad-vocab");
  write(dir + "/merges.txt", "#version: 0.2\n");
  struct Case {
    const char* name;
    std::string vocab;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"not JSON",
       "{\"a\": 1,\n \"b\": }",
       {"vocab.json: invalid JSON", "line 2", "GPT-2's vocab.json"}},
      {"an array", "[1, 2]", {"vocab.json: expected a JSON object of token -> id, got array"}},
      {"a string id", "{\"a\": \"1\"}", {"token \"a\": the id must be an integer, got \"1\""}},
      {"a fractional id", "{\"a\": 1.5}", {"token \"a\": the id must be an integer, got 1.5"}},
      {"a negative id", "{\"a\": -1}", {"token \"a\": id -1 is outside 0..16777215"}},
      {"a huge id", "{\"a\": 4294967296}", {"id 4294967296 is outside"}},
      {"a repeated key", "{\"a\": 1, \"b\": 2, \"a\": 3}", {"vocab.json: duplicate key \"a\""}},
      {"an empty token", "{\"\": 1}", {"the empty string is not a token"}},
      {"a repeated id",
       byteVocabulary("\"ab\": 97"),
       {"token \"ab\": id 97 is also the id of \"a\"", "own id"}},
      {"a character outside the byte alphabet",
       "{\"\xE4\xB8\x80\": 0}",
       {"U+4E00, which is not in GPT-2's byte alphabet"}},
      {"a byte without a token",
       byteVocabulary("", true, 0x0A),
       {"no token for the byte 0x0A (\"\xC4\x8A\")", "each of the 256 bytes"}},
      {"no end of document", byteVocabulary("", false), {"no \"<|endoftext|>\" token"}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    write(dir + "/vocab.json", c.vocab);
    try {
      BpeTokenizer(dir + "/vocab.json", dir + "/merges.txt");
      FAIL("accepted");
    } catch (const ds::Error& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(dir + "/vocab.json"));
      for (const auto& part : c.message) CHECK_THAT(what, Catch::Contains(part));
    }
  }
  CHECK_THROWS_WITH(BpeTokenizer(dir + "/missing.json", dir + "/merges.txt"),
                    Catch::Contains("missing.json: cannot open GPT-2 vocabulary (vocab-file)"));
}

TEST_CASE("bpe files: a bad merges.txt is refused naming the file and the line") {
  const std::string dir = ds::test::makeScratchDir("bpe-bad-merges");
  write(dir + "/vocab.json", byteVocabulary("\"ab\": 257, \"\xC4\xA0t\": 258"));
  struct Case {
    const char* name;
    std::string merges;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"one token", "#version: 0.2\na\n", {"merges.txt:2: expected two tokens", "got \"a\""}},
      {"three tokens", "a b\nb c d\n", {"merges.txt:2: expected two tokens"}},
      {"two spaces", "#version: 0.2\na  b\n", {"merges.txt:2: expected two tokens"}},
      {"a blank line", "a b\n\n\xC4\xA0 t\n", {"merges.txt:2: expected two tokens"}},
      {"a part not in the vocabulary",
       "a b\nab a\n",
       {"merges.txt:2: merging \"ab\" and \"a\" makes \"aba\", which is not a token of",
        "same tokenizer"}},
      {"an unknown part",
       "#version: 0.2\n\xC4\xA0th e\n",
       {"merges.txt:2: \"\xC4\xA0th\" is not a token of", "vocab.json"}},
      {"a repeated pair",
       "#version: 0.2\na b\n\xC4\xA0 t\na b\n",
       {"merges.txt:4: the pair \"a b\" is already on line 2"}},
      {"a character outside the alphabet",
       "a \xE4\xB8\x80\n",
       {"merges.txt:1: \"\xE4\xB8\x80\" has the character U+4E00"}},
      {"invalid UTF-8", "a \xFF\n", {"merges.txt:1:", "is not valid UTF-8"}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    write(dir + "/merges.txt", c.merges);
    try {
      BpeTokenizer(dir + "/vocab.json", dir + "/merges.txt");
      FAIL("accepted");
    } catch (const ds::Error& e) {
      for (const auto& part : c.message) CHECK_THAT(e.what(), Catch::Contains(part));
    }
  }
  CHECK_THROWS_WITH(BpeTokenizer(dir + "/vocab.json", dir + "/none.txt"),
                    Catch::Contains("none.txt: cannot open GPT-2 merges (merge-file)"));

  // No "#version" line, Windows line ends and no final newline are all fine.
  write(dir + "/merges.txt", "a b\r\n\xC4\xA0 t");
  const BpeTokenizer tokenizer(dir + "/vocab.json", dir + "/merges.txt");
  CHECK(tokenizer.encode("ab tab") == std::vector<int32_t>{257, 258, 257});
}

TEST_CASE("makeTokenizer: NeoX's tokenizer-type names, and the files each one needs") {
  const std::string dir = ds::test::makeScratchDir("tokenizer-type");
  const auto files = ds::test::writeSmallBpe(dir);
  for (const char* name : {"ByteTokenizer", "byte"}) {
    const auto byte = makeTokenizer(name, "", "");
    CHECK(byte->vocabularySize() == ds::runtime::ByteTokenizer::kVocabularySize);
    CHECK(byte->endOfDocument() == ds::runtime::ByteTokenizer::kEndOfDocument);
  }
  const auto bpe = makeTokenizer("GPT2BPETokenizer", files.vocabFile, files.mergeFile);
  CHECK(bpe->endOfDocument() == files.ids.at("<|endoftext|>"));
  CHECK(bpe->encode(" the") == std::vector<int32_t>{files.ids.at(" the")});
  // NeoX compares the name lowercased.
  CHECK(makeTokenizer("gpt2bpetokenizer", files.vocabFile, files.mergeFile)->encode(" the") ==
        std::vector<int32_t>{files.ids.at(" the")});
  CHECK(ds::runtime::parseTokenizerType("hftokenizer") == ds::runtime::TokenizerType::Hf);
  CHECK(ds::runtime::parseTokenizerType("SpmTokenizer") ==
        ds::runtime::TokenizerType::SentencePiece);
  CHECK_THROWS(ds::runtime::parseTokenizerType("GPT2BPETokenize"));

  CHECK_THROWS_WITH(makeTokenizer("TiktokenTokenizer", "", ""),
                    Catch::Contains("tokenizer-type: TiktokenTokenizer is not implemented") &&
                        Catch::Contains("accepted: ByteTokenizer, GPT2BPETokenizer, HFTokenizer, "
                                        "SPMTokenizer, byte"));
  CHECK_THROWS_WITH(
      makeTokenizer("GPT2BPETokenizer", files.vocabFile, ""),
      Catch::Contains("needs vocab-file") && Catch::Contains("merge-file is not set"));
  // NeoX's default: a config that names no tokenizer and no files is told both ways out.
  CHECK_THROWS_WITH(makeTokenizer("GPT2BPETokenizer", "", ""),
                    Catch::Contains("vocab-file is not set") &&
                        Catch::Contains("NeoX's default tokenizer-type") &&
                        Catch::Contains("tokenizer-type: ByteTokenizer"));
  CHECK_THROWS_WITH(
      makeTokenizer("ByteTokenizer", files.vocabFile, ""),
      Catch::Contains("vocab-file " + files.vocabFile) && Catch::Contains("needs no files"));
}
