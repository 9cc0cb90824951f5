// The four character classes GPT-2's pre-tokenizer tells apart: \p{L} letters, \p{N} numbers,
// \s whitespace, and everything else. Not a general Unicode library: no case, no normalisation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::runtime {

enum class CharClass : uint8_t { Letter, Number, Whitespace, Other };

// Letters and numbers by general category (L*, N*), from the generated table; whitespace is
// Unicode's White_Space property, which is what Python's `regex` module matches with \s.
// Code points outside the table (unassigned, surrogates, > U+10FFFF) are Other.
CharClass charClass(char32_t codePoint);

// The Unicode version the letter/number table was generated from.
const char* unicodeTableVersion();

namespace unicode_detail {
struct CodePointRange {
  char32_t first, last;  // inclusive
  CharClass kind;
};
extern const char* const kTableUnicodeVersion;
extern const CodePointRange kLetterNumberRanges[];  // sorted, disjoint
extern const size_t kLetterNumberRangeCount;
}  // namespace unicode_detail

}  // namespace ds::runtime
