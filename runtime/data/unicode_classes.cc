// charClass: a binary search in the generated letter/number ranges, and White_Space by hand.
#include "runtime/data/unicode_classes.h"

#include <algorithm>

namespace ds::runtime {

namespace {

// Unicode's White_Space property (PropList.txt; unchanged since Unicode 6.3). Not str.isspace():
// that also counts U+001C..U+001F, which the `regex` module GPT-2 uses does not match with \s.
bool isWhiteSpace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

}  // namespace

CharClass charClass(char32_t codePoint) {
  // ASCII first: most text is mostly ASCII, and it needs no search.
  if (codePoint < 0x80) {
    if ((codePoint | 0x20) >= 'a' && (codePoint | 0x20) <= 'z') return CharClass::Letter;
    if (codePoint >= '0' && codePoint <= '9') return CharClass::Number;
    return isWhiteSpace(codePoint) ? CharClass::Whitespace : CharClass::Other;
  }
  if (isWhiteSpace(codePoint)) return CharClass::Whitespace;
  using unicode_detail::kLetterNumberRangeCount;
  using unicode_detail::kLetterNumberRanges;
  const auto* end = kLetterNumberRanges + kLetterNumberRangeCount;
  // The first range whose last code point is not below codePoint.
  const auto* it = std::lower_bound(
      kLetterNumberRanges, end, codePoint,
      [](const unicode_detail::CodePointRange& r, char32_t c) { return r.last < c; });
  if (it != end && it->first <= codePoint) return it->kind;
  return CharClass::Other;
}

const char* unicodeTableVersion() { return unicode_detail::kTableUnicodeVersion; }

}  // namespace ds::runtime
