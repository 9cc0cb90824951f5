// Strict UTF-8 decoding, one character at a time, with Python's "surrogateescape" rule for bytes
// that are not valid UTF-8: each such byte b stands for the lone surrogate U+DC00 + b. That keeps
// every byte string tokenizable and decodable back to the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::runtime {

struct Utf8Char {
  char32_t codePoint;  // U+DC80..U+DCFF for an escaped invalid byte
  uint8_t length;      // bytes consumed: 1..4 (1 for an invalid byte)
  bool valid;
};

// The character starting at text[pos] (pos < text.size()). Valid means well-formed UTF-8 as
// Python and RFC 3629 define it: no overlong forms, no encoded surrogates, nothing past U+10FFFF,
// no truncated sequence.
Utf8Char decodeUtf8At(std::string_view text, size_t pos);

// Where the first invalid byte is (text.size() when there is none), and how many there are.
struct Utf8Check {
  size_t firstInvalid;
  size_t invalidBytes;
};
Utf8Check checkUtf8(std::string_view text);

// `text` with each maximal invalid subpart (Unicode's "best practice" for U+FFFD substitution:
// the longest prefix of a well-formed sequence, or one byte) replaced by U+FFFD. It is how
// Python's errors="replace", Rust's from_utf8_lossy and the WHATWG decoder (Node's Buffer) read
// bytes that are not UTF-8.
std::string replaceInvalidUtf8(std::string_view text);

// Appends codePoint (<= U+10FFFF) as UTF-8.
void appendUtf8(std::string& out, char32_t codePoint);

}  // namespace ds::runtime
