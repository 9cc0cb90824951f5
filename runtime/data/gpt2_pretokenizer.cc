// splitGpt2Words: the pattern's alternatives tried in order at each position, as a backtracking
// regex engine would, over the text decoded to characters once.
#include "runtime/data/gpt2_pretokenizer.h"

#include <cstdint>

#include "runtime/data/unicode_classes.h"
#include "runtime/data/utf8.h"

namespace ds::runtime {

namespace {

struct Chars {
  std::vector<char32_t> codePoints;
  std::vector<CharClass> classes;
  std::vector<size_t> offsets;  // byte offset of each character, plus text.size() at the end
};

Chars decode(std::string_view text) {
  Chars c;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char ch = decodeUtf8At(text, pos);
    c.codePoints.push_back(ch.codePoint);
    c.classes.push_back(charClass(ch.codePoint));
    c.offsets.push_back(pos);
    pos += ch.length;
  }
  c.offsets.push_back(text.size());
  return c;
}

// 's 't 're 've 'm 'll 'd: how many characters the contraction at i has, 0 if none. Case matters
// (the pattern has no IGNORECASE), and only the ASCII apostrophe counts.
size_t contractionLength(const std::vector<char32_t>& cp, size_t i) {
  if (cp[i] != U'\'' || i + 1 >= cp.size()) return 0;
  const char32_t a = cp[i + 1];
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 >= cp.size()) return 0;
  const char32_t b = cp[i + 2];
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

size_t runEnd(const std::vector<CharClass>& classes, size_t i, CharClass kind) {
  while (i < classes.size() && classes[i] == kind) ++i;
  return i;
}

// The end (in characters) of the word that starts at character i.
size_t wordEnd(const Chars& c, size_t i) {
  const size_t n = c.classes.size();
  if (const size_t k = contractionLength(c.codePoints, i)) return i + k;
  const CharClass kind = c.classes[i];
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a run of one class, with at most one plain
  // space (U+0020, no other whitespace) in front of it.
  if (kind != CharClass::Whitespace) return runEnd(c.classes, i, kind);
  if (c.codePoints[i] == U' ' && i + 1 < n && c.classes[i + 1] != CharClass::Whitespace)
    return runEnd(c.classes, i + 1, c.classes[i + 1]);
  // "\s+(?!\S)": the whitespace run, less its last character when a non-space follows (that one
  // is left to lead the next word). "\s+": a lone whitespace character before a non-space.
  const size_t end = runEnd(c.classes, i, CharClass::Whitespace);
  if (end == n || end - i == 1) return end;
  return end - 1;
}

}  // namespace

std::vector<std::string_view> splitGpt2Words(std::string_view text) {
  const Chars c = decode(text);
  std::vector<std::string_view> words;
  for (size_t i = 0; i < c.classes.size();) {
    const size_t end = wordEnd(c, i);
    words.push_back(text.substr(c.offsets[i], c.offsets[end] - c.offsets[i]));
    i = end;
  }
  return words;
}

}  // namespace ds::runtime
