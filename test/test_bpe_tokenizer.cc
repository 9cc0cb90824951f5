// The GPT-2 BPE tokenizer's ids against GPT-2's algorithm in Python (test/reference/
// bpe_reference.py) on a vocabulary that script learns from a multilingual sample, byte for byte
// over unicode text, invalid UTF-8 and pathological words; plus hand-checked ids on a written
// vocabulary (no Python needed) and decode(encode(x)) == x throughout.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/data/bpe_tokenizer.h"
#include "test/bpe_reference.h"
#include "test/bpe_test_files.h"
#include "test/scratch_dir.h"

using ds::runtime::BpeTokenizer;

namespace {

// What the vocabulary is learned from: several scripts, contractions, numbers, emoji, runs.
const char* const kSample =
    "The quick brown fox jumps over the lazy dog. It's 2024; we'll see what they've done.\n"
    "She said: \"I'd rather not\" -- and that's that!!! (really?) [yes] {no} <tag/> a+b=c\n"
    "Numbers: 1234567890, 3.14159, 1,000,000 and 42nd; phone +1-555-0100.\n\n"
    "Fran\xC3\xA7"
    "ais: o\xC3\xB9 est la biblioth\xC3\xA8que? \xC3\x89t\xC3\xA9 \xC3\xA0 "
    "No\xC3\xABl. Deutsch: Stra\xC3\x9F"
    "e, \xC3\xBC"
    "ber, Gr\xC3\xB6\xC3\x9F"
    "e.\n"
    "\xD0\xA0\xD1\x83\xD1\x81\xD1\x81\xD0\xBA\xD0\xB8\xD0\xB9 \xD1\x82\xD0\xB5\xD0\xBA\xD1\x81"
    "\xD1\x82. \xCE\x95\xCE\xBB\xCE\xBB\xCE\xB7\xCE\xBD\xCE\xB9\xCE\xBA\xCE\xAC.\n"
    "\xE4\xB8\xAD\xE6\x96\x87\xE6\x96\x87\xE6\x9C\xAC\xE3\x80\x82\xE6\x97\xA5\xE6\x9C\xAC\xE8"
    "\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x82\n"
    "Emoji: \xF0\x9F\x99\x82\xF0\x9F\x99\x82 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD "
    "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\n"
    "    indented code();\n\tif (x) { return y; }\r\n"
    "the the the then there these those they their them\n";

// Texts compared with the reference: every branch of the pattern, many scripts, whitespace of
// every kind, invalid UTF-8, and words long enough to exercise the merge heap.
std::vector<std::string> comparedTexts() {
  std::vector<std::string> texts = {
      "",
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "It's I'm you're we've he'd they'll DON'T 'tis o'clock",
      "  leading spaces, trailing spaces   ",
      "line one\nline two\n\n\nline five\r\n\ttabbed\t\tdouble\n",
      "   \n\n   \t  ",
      "numbers 3.14159 and 1,000,000 or 0xFF -42 +7 1e10 2024-05-09",
      "punctuation!!! ?? ... --- (a) [b] {c} <d> \"e\" 'f' `g`",
      "Fran\xC3\xA7"
      "ais \xC3\xA9t\xC3\xA9 No\xC3\xABl Stra\xC3\x9F"
      "e \xC3\x86sir",
      "decomposed: e\xCC\x81t\xCC\x81 n\xCC\x83 (combining marks are not letters)",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! "
      "\xCE\x93\xCE\xB5\xCE\xB9\xCE\xAC \xCF\x83\xCE\xBF\xCF\x85",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x8C\xE4\xB8\xAD\xE6\x96\x87"
      "\xE3\x80\x80\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5"
      "\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA",
      "emoji \xF0\x9F\x99\x82\xF0\x9F\x99\x82 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD "
      "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 \xE2\x9D\xA4"
      "\xEF\xB8\x8F",
      "other digits: \xD9\xA1\xD9\xA2\xD9\xA3 \xEF\xBC\x91\xEF\xBC\x92 x\xC2\xB2 "
      "\xE2\x85\xAB \xC2\xBD",
      "odd whitespace:\xC2\xA0nbsp\xE2\x80\x83"
      "em\xE2\x80\xA8ls\xC2\x85nel\x0B\x0C end",
      "not whitespace: \x1C\x1D\x1E\x1F zero\xE2\x80\x8Bwidth \xEF\xBB\xBF"
      "bom",
      "<|endoftext|> is plain text here",
      "invalid: \xFF\xFE caf\xE9 \xC3 \xE2\x82 \xED\xA0\x80 \xC0\xAF \xF4\x90\x80\x80 end\x80",
      std::string("nul") + '\0' + "byte and \x01\x02 controls",
  };
  texts.push_back(std::string(3000, 'a'));  // one 3000-byte word
  std::string repeated;
  for (int i = 0; i < 300; ++i) repeated += "\xF0\x9F\x99\x82";
  texts.push_back(repeated);
  texts.push_back(std::string(1000, ' ') + "x" + std::string(999, '\n'));
  std::string mixed;
  for (int i = 0; i < 200; ++i) mixed += "the" + std::to_string(i) + "!? ";
  texts.push_back(mixed);
  texts.push_back(kSample);
  return texts;
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char b : bytes) out += {digits[b >> 4], digits[b & 15]};
  return out;
}

// The reference's ids for each text.
std::vector<std::vector<int32_t>> referenceIds(const std::string& dir, const std::string& vocab,
                                               const std::string& merges,
                                               const std::vector<std::string>& texts) {
  const std::string input = dir + "/texts.hex";
  {
    std::ofstream out(input);
    for (const auto& text : texts) out << hex(text) << "\n";
  }
  std::istringstream lines(ds::test::runBpeReference("encode " + vocab + " " + merges, input));
  std::vector<std::vector<int32_t>> ids;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream numbers(line);
    ids.emplace_back();
    for (int32_t id; numbers >> id;) ids.back().push_back(id);
  }
  return ids;
}

}  // namespace

TEST_CASE("bpe: a written vocabulary gives the ids GPT-2's merge order gives") {
  const std::string dir = ds::test::makeScratchDir("bpe-small");
  const auto files = ds::test::writeSmallBpe(dir);
  const BpeTokenizer tokenizer(files.vocabFile, files.mergeFile);
  const auto id = [&](const std::string& token) { return files.ids.at(token); };
  CHECK(tokenizer.vocabularySize() == 256 + 7 + 1);
  CHECK(tokenizer.endOfDocument() == id("<|endoftext|>"));
  CHECK(tokenizer.encode(" the") == std::vector<int32_t>{id(" the")});
  CHECK(tokenizer.encode("the") == std::vector<int32_t>{id("t"), id("he")});
  // Every "a b" first, then "ab a" (ranked earlier) where it now occurs.
  CHECK(tokenizer.encode("abab") == std::vector<int32_t>{id("ab"), id("ab")});
  CHECK(tokenizer.encode("aba") == std::vector<int32_t>{id("aba")});
  CHECK(tokenizer.encode("n\xC3\xA9"
                         "e") == std::vector<int32_t>{id("n"), id("\xC3\xA9"), id("e")});
  CHECK(tokenizer.encode("\n\n\n") == std::vector<int32_t>{id("\n\n"), id("\n")});
  CHECK(tokenizer.encode("x\xFF") == std::vector<int32_t>{id("x"), id("\xFF")});
  CHECK(tokenizer.decode({id(" the"), tokenizer.endOfDocument(), -1, 100000, id("\xC3\xA9")}) ==
        " the<|endoftext|>\xC3\xA9");
  for (const auto& text : comparedTexts()) CHECK(tokenizer.decode(tokenizer.encode(text)) == text);
}

TEST_CASE("bpe: ids equal GPT-2's encoder in Python on unicode text, byte for byte", "[python]") {
  if (ds::test::skipWithoutRegexModule()) return;
  const std::string dir = ds::test::makeScratchDir("bpe-reference");
  std::ofstream(dir + "/sample.txt", std::ios::binary) << kSample;
  ds::test::runBpeReference("train " + dir + "/sample.txt 400 " + dir);
  const BpeTokenizer tokenizer(dir + "/vocab.json", dir + "/merges.txt");
  CHECK(tokenizer.vocabularySize() > 256 + 250);  // the merges were learned, not just bytes

  const auto texts = comparedTexts();
  const auto expected = referenceIds(dir, dir + "/vocab.json", dir + "/merges.txt", texts);
  REQUIRE(expected.size() == texts.size());
  size_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO("text " << i << ": " << texts[i].substr(0, 80));
    const auto ids = tokenizer.encode(texts[i]);
    CHECK(ids == expected[i]);
    CHECK(tokenizer.decode(ids) == texts[i]);
    CHECK(tokenizer.encode(texts[i]) == ids);  // the second time from the word cache
    tokens += ids.size();
  }
  // The learned merges shorten text: far fewer tokens than bytes.
  size_t bytes = 0;
  for (const auto& text : texts) bytes += text.size();
  CHECK(tokens < bytes);
}

TEST_CASE("bpe: the written vocabulary's ids equal the Python reference's too", "[python]") {
  if (ds::test::skipWithoutRegexModule()) return;
  const std::string dir = ds::test::makeScratchDir("bpe-small-reference");
  const auto files = ds::test::writeSmallBpe(dir);
  const BpeTokenizer tokenizer(files.vocabFile, files.mergeFile);
  std::vector<std::string> texts = comparedTexts();
  texts.insert(texts.end(), {"abab", "ababab aba ab a b", " the then theme", "\n\n\n\n\n"});
  const auto expected = referenceIds(dir, files.vocabFile, files.mergeFile, texts);
  REQUIRE(expected.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO("text " << i << ": " << texts[i].substr(0, 80));
    CHECK(tokenizer.encode(texts[i]) == expected[i]);
  }
}
