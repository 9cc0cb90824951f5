// GPT-2's pre-tokenizer and what it stands on: strict UTF-8 with surrogate escapes, the
// letter/number/whitespace classes (against Python's `regex` on every assigned code point), and
// the pattern's splits on hand-checked cases.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/data/gpt2_pretokenizer.h"
#include "runtime/data/unicode_classes.h"
#include "runtime/data/utf8.h"
#include "test/bpe_reference.h"

using namespace ds::runtime;

TEST_CASE("utf8: well-formed sequences decode, each byte of a bad one is escaped alone") {
  struct Case {
    std::string bytes;
    std::vector<char32_t> codePoints;
  };
  const std::vector<Case> cases = {
      {"a\xC3\xA9", {U'a', 0xE9}},
      {"\xE6\x9D\xB1\xF0\x9F\x99\x82", {0x6771, 0x1F642}},
      {"\xF4\x8F\xBF\xBF", {0x10FFFF}},
      {"\xF4\x90\x80\x80", {0xDCF4, 0xDC90, 0xDC80, 0xDC80}},  // past U+10FFFF
      {"\xC0\xAF", {0xDCC0, 0xDCAF}},                          // overlong '/'
      {"\xE0\x80\xAF", {0xDCE0, 0xDC80, 0xDCAF}},              // overlong
      {"\xED\xA0\x80", {0xDCED, 0xDCA0, 0xDC80}},              // an encoded surrogate
      {"\xE2\x82", {0xDCE2, 0xDC82}},                          // truncated at the end
      {"\xE2\x82x", {0xDCE2, 0xDC82, U'x'}},                   // truncated before ASCII
      {"\x80\xFF", {0xDC80, 0xDCFF}},
  };
  for (const auto& c : cases) {
    std::vector<char32_t> got;
    for (size_t pos = 0; pos < c.bytes.size(); pos += decodeUtf8At(c.bytes, pos).length)
      got.push_back(decodeUtf8At(c.bytes, pos).codePoint);
    CHECK(got == c.codePoints);
  }
  const Utf8Check check = checkUtf8("ok\xC3\xA9 \xFF then \xE2\x82");
  CHECK(check.firstInvalid == 5);
  CHECK(check.invalidBytes == 3);
  CHECK(checkUtf8("fine \xE6\x9D\xB1").invalidBytes == 0);
}

TEST_CASE("pre-tokenizer: GPT-2's pattern, case by case") {
  struct Case {
    std::string text;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"Hello world", {"Hello", " world"}},
      {"it's we'll've I'd", {"it", "'s", " we", "'ll", "'ve", " I", "'d"}},
      {"I'M x'sam", {"I", "'", "M", " x", "'s", "am"}},  // case matters; "'s" even before letters
      {"''s !'t", {"''", "s", " !'", "t"}},              // inside a punctuation run, no contraction
      {"  hello", {" ", " hello"}},                      // a space run leaves one space to the word
      {"x   ", {"x", "   "}},                            // trailing whitespace stays one word
      {"a\n\nb", {"a", "\n", "\n", "b"}},
      {"\t\tx", {"\t", "\t", "x"}},
      {"a \tb", {"a", " ", "\t", "b"}},  // only U+0020 joins the next word
      {"123abc 45 6", {"123", "abc", " 45", " 6"}},
      {"hi!!! ?", {"hi", "!!!", " ?"}},
      {"n\xC3\xA9"
       "e \xE2\x82\xAC 5",
       {"n\xC3\xA9"
        "e",
        " \xE2\x82\xAC", " 5"}},
      {"\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x80x", {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xE3\x80\x80", "x"}},
      {"e\xCC\x81t\xC3\xA9", {"e", "\xCC\x81", "t\xC3\xA9"}},  // a combining mark is not a letter
      {"x\x1Fy", {"x", "\x1F", "y"}},  // U+001F: str.isspace() says yes, \s says no
      {"\xFF\xFE"
       "ab \xC3",
       {"\xFF\xFE", "ab", " \xC3"}},  // invalid bytes are "other"
  };
  for (const auto& c : cases) {
    INFO(c.text);
    std::vector<std::string> got;
    for (const auto word : splitGpt2Words(c.text)) got.emplace_back(word);
    CHECK(got == c.words);
  }
}

TEST_CASE(
    "character classes: equal to Python regex's letters, numbers and whitespace on every "
    "assigned code point",
    "[python]") {
  if (ds::test::skipWithoutRegexModule()) return;
  const auto reference = nlohmann::json::parse(ds::test::runBpeReference("classes"));
  std::vector<CharClass> expected(0x110000, CharClass::Other);
  const std::pair<const char*, CharClass> kinds[] = {
      {"L", CharClass::Letter}, {"N", CharClass::Number}, {"S", CharClass::Whitespace}};
  for (const auto& [key, kind] : kinds)
    for (const auto& span : reference[key])
      for (uint32_t cp = span[0]; cp <= span[1].get<uint32_t>(); ++cp) expected[cp] = kind;
  std::vector<bool> unassigned(0x110000, false);
  for (const auto& span : reference["unassigned"])
    for (uint32_t cp = span[0]; cp <= span[1].get<uint32_t>(); ++cp) unassigned[cp] = true;
  size_t checked = 0, wrong = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (unassigned[cp]) continue;  // their class depends on the Unicode version
    ++checked;
    if (charClass(cp) != expected[cp] && ++wrong <= 10)
      FAIL_CHECK("U+" << std::hex << static_cast<uint32_t>(cp) << ": class "
                      << static_cast<int>(charClass(cp)) << ", regex says "
                      << static_cast<int>(expected[cp]) << " (table: Unicode "
                      << unicodeTableVersion()
                      << ", Python's unicodedata: " << reference["unicodedata"].get<std::string>()
                      << "; regenerate with tools/unicode/gen_letter_number_table.py)");
  }
  CHECK(wrong == 0);
  CHECK(checked > 280000);
}
