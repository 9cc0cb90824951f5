// Unicode normalization form C (what a tokenizer.json's "NFC" normalizer does), through ICU: the
// composition tables change with each Unicode version, so they come from a maintained library
// rather than a table of our own.
#pragma once

#include <string>
#include <string_view>

namespace ds::runtime {

// `utf8` must be valid UTF-8 (replaceInvalidUtf8 makes it so). Throws ds::Error if ICU fails.
std::string normalizeNfc(std::string_view utf8);

// The Unicode version of ICU's normalization data, for messages and tests.
std::string normalizationUnicodeVersion();

}  // namespace ds::runtime
