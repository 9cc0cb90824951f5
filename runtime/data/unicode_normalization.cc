// normalizeNfc: ICU's NFC instance on UTF-8 directly (no UTF-16 round trip for the caller), with
// a quick check first, since most text is already NFC and then comes back unchanged.
#include "runtime/data/unicode_normalization.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uversion.h>

#include "common/error.h"

namespace ds::runtime {

namespace {

const icu::Normalizer2& nfc() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* instance = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status) || instance == nullptr)
    throw Error(std::string("ICU: no NFC normalizer (") + u_errorName(status) +
                "); is ICU's data library (libicu) installed?");
  return *instance;
}

}  // namespace

std::string normalizeNfc(std::string_view utf8) {
  const icu::Normalizer2& normalizer = nfc();
  const icu::StringPiece input(utf8.data(), static_cast<int32_t>(utf8.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (normalizer.isNormalizedUTF8(input, status) && U_SUCCESS(status)) return std::string(utf8);
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(utf8.size());
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(utf8.size()));
  normalizer.normalizeUTF8(0, input, sink, nullptr, status);
  if (U_FAILURE(status))
    throw Error(std::string("ICU: NFC normalization failed: ") + u_errorName(status));
  return out;
}

std::string normalizationUnicodeVersion() {
  UVersionInfo version;
  u_getUnicodeVersion(version);
  char text[U_MAX_VERSION_STRING_LENGTH];
  u_versionToString(version, text);
  return text;
}

}  // namespace ds::runtime
