// Text from an input file made safe to print on a terminal: control bytes (ESC, BEL, CR, ...;
// also the C1 controls U+0080..U+009F, which some terminals obey) are written as \xNN escapes,
// so a hostile line quoted in a message cannot move the cursor, recolour or retitle the
// terminal. Newlines and tabs stay: messages use them. Other bytes, UTF-8 or not, pass as they are.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ds {

inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", b);
    out += hex;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    const bool c1 = b == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if (c1) {
      escape(b);
      escape(static_cast<unsigned char>(text[++i]));
    } else if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) {
      escape(b);
    } else {
      out += static_cast<char>(b);
    }
  }
  return out;
}

}  // namespace ds
