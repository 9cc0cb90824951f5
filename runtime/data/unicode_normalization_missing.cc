// runtime/data/unicode_normalization.h in a build without ICU (CMake's DS_ICU=OFF, as
// scripts/gpu-bundle builds): a tokenizer.json whose normalizer is NFC is refused by name;
// everything else tokenizes as in the full build.
#include "common/error.h"
#include "runtime/data/unicode_normalization.h"

namespace ds::runtime {

std::string normalizeNfc(std::string_view) {
  throw Error(
      "tokenizer.json: its NFC normalizer needs ICU, which this build leaves out (DS_ICU=OFF); "
      "use a build with ICU (libicu-dev)");
}

std::string normalizationUnicodeVersion() { return "none (a build without ICU)"; }

}  // namespace ds::runtime
