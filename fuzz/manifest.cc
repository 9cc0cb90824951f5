// Fuzz target: a checkpoint's manifest.json as a resume, ds-generate and the part checks read it
// (parseManifest). The input is parsed as it is, and again with its manifest_checksum made to
// match, so that mutations get past the checksum to the fields behind it. A manifest that is
// accepted must survive the writer: manifestText of it parses back to the same text.
#include <nlohmann/json.hpp>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/json_text.h"
#include "fuzz/fuzz_target.h"
#include "runtime/checkpoint/manifest.h"

namespace ds::fuzz {
namespace {

constexpr const char* kPath = "fuzz/manifest.json";

// The input with its checksum recomputed as the writer computes it (manifest.cc: CRC32C of
// dump() of everything else), or "" when it is not a JSON object.
std::string withMatchingChecksum(std::string_view input) {
  nlohmann::json m;
  try {
    m = parseJsonText(input, kPath, {16, DuplicateKeys::LastWins});
  } catch (const Error&) {
    return "";
  }
  if (!m.is_object()) return "";
  m.erase("manifest_checksum");
  const std::string rest = m.dump();
  m["manifest_checksum"] = "crc32c:" + hex32(crc32c(rest.data(), rest.size()));
  return m.dump(2);
}

void checkRoundTrip(const runtime::CheckpointManifest& manifest) {
  const std::string text = runtime::manifestText(manifest);
  std::string again;
  try {
    again = runtime::manifestText(runtime::parseManifest(text, kPath));
  } catch (const Error& e) {
    std::fprintf(stderr, "manifestText wrote a manifest parseManifest refuses: %s\n", e.what());
    DS_FUZZ_CHECK(!"manifestText's output parses");
  }
  DS_FUZZ_CHECK(again == text);
}

void fuzzManifest(std::string_view input) {
  try {
    checkRoundTrip(runtime::parseManifest(input, kPath));
  } catch (const Error&) {
  }
  const std::string fixed = withMatchingChecksum(input);
  if (!fixed.empty()) checkRoundTrip(runtime::parseManifest(fixed, kPath));
}

}  // namespace

DS_FUZZ_TARGET(manifest, fuzzManifest);

}  // namespace ds::fuzz
