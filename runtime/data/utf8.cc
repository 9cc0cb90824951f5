// decodeUtf8At / checkUtf8 / appendUtf8: the byte patterns of RFC 3629's table, nothing more.
#include "runtime/data/utf8.h"

namespace ds::runtime {

namespace {

bool isContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Whether `prefix` (2..4 bytes) is the start of some well-formed UTF-8 character: the lead byte
// allows the second byte's range (RFC 3629's table) and the rest are continuation bytes.
bool startsWellFormed(std::string_view prefix) {
  const auto b0 = static_cast<unsigned char>(prefix[0]);
  size_t length;
  unsigned char low = 0x80, high = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return false;
  }
  if (prefix.size() > length) return false;
  const auto b1 = static_cast<unsigned char>(prefix[1]);
  if (b1 < low || b1 > high) return false;
  for (size_t i = 2; i < prefix.size(); ++i)
    if (!isContinuation(static_cast<unsigned char>(prefix[i]))) return false;
  return true;
}

}  // namespace

Utf8Char decodeUtf8At(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char b0 = byte(0);
  const Utf8Char invalid{static_cast<char32_t>(0xDC00 + b0), 1, false};
  if (b0 < 0x80) return {b0, 1, true};
  size_t length;
  char32_t cp;
  // The second byte's range depends on the first: that is what rules out overlong forms
  // (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points past U+10FFFF (F4 90..BF).
  unsigned char low = 0x80, high = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return invalid;  // a continuation byte, C0/C1 (always overlong) or F5..FF
  }
  if (pos + length > text.size()) return invalid;
  if (byte(1) < low || byte(1) > high) return invalid;
  for (size_t i = 1; i < length; ++i) {
    if (!isContinuation(byte(i))) return invalid;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  return {cp, static_cast<uint8_t>(length), true};
}

Utf8Check checkUtf8(std::string_view text) {
  Utf8Check check{text.size(), 0};
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decodeUtf8At(text, pos);
    if (!c.valid) {
      if (check.invalidBytes++ == 0) check.firstInvalid = pos;
    }
    pos += c.length;
  }
  return check;
}

std::string replaceInvalidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decodeUtf8At(text, pos);
    if (c.valid) {
      out.append(text.substr(pos, c.length));
      pos += c.length;
      continue;
    }
    // The subpart: as many bytes as still begin a well-formed sequence. Each longer prefix of a
    // valid sequence is itself decoded as valid-so-far, so lengthening the window one byte at a
    // time and asking whether the bytes so far could start a character finds it.
    size_t length = 1;
    while (pos + length < text.size() && length < 4 &&
           startsWellFormed(text.substr(pos, length + 1)))
      ++length;
    appendUtf8(out, 0xFFFD);
    pos += length;
  }
  return out;
}

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace ds::runtime
