// The fuzz corpora replayed in every build: each file of test/fuzz_corpus/NAME/ goes through fuzz
// target NAME (fuzz/NAME.cc, the product's own entry point). A ds::Error is a refusal; any other
// exception fails here, a crash or a broken DS_FUZZ_CHECK ends the test program. The sanitized,
// coverage-guided runs that grow these corpora are scripts/fuzz's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "fuzz/fuzz_target.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> corpusFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string contents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("fuzz corpora: every file is accepted or refused with a ds::Error") {
  const auto& targets = ds::fuzz::fuzzTargets();
  REQUIRE(targets.size() == 11);
  for (const auto& target : targets) {
    DYNAMIC_SECTION(target.name) {
      const fs::path dir = fs::path(DS_FUZZ_CORPUS_DIR) / target.name;
      REQUIRE(fs::is_directory(dir));
      const auto files = corpusFiles(dir);
      REQUIRE(!files.empty());
      size_t accepted = 0;
      for (const auto& file : files) {
        INFO(file.string());
        const std::string bytes = contents(file);
        try {
          accepted += ds::fuzz::runFuzzTarget(
              target, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        } catch (const std::exception& e) {
          FAIL("uncaught " << typeid(e).name() << ": " << e.what());
        }
      }
      // A corpus that no longer gets past the first check tests only that check.
      CHECK(accepted > 0);
    }
  }
}

TEST_CASE("fuzz corpora: every corpus folder has its target") {
  std::set<std::string> names;
  for (const auto& target : ds::fuzz::fuzzTargets()) names.insert(target.name);
  for (const auto& entry : fs::directory_iterator(DS_FUZZ_CORPUS_DIR)) {
    INFO(entry.path().string());
    CHECK(names.count(entry.path().filename().string()) == 1);
  }
}
