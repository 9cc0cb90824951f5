// GPT samples over an indexed dataset: the split rule, samples that are windows of the shuffled
// document stream overlapping by one token, coverage of the stream, and determinism by seed.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/data/gpt_samples.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;

namespace {

// Document d holds tokens d * 1000 + k, k = 0 .. length - 1, so every token names its place.
std::string writeDocuments(const std::vector<size_t>& lengths) {
  const std::string prefix = ds::test::makeScratchDir("gpt-samples") + "/docs";
  IndexedDatasetWriter writer(prefix, TokenType::Int32);
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> tokens(lengths[d]);
    for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = static_cast<int32_t>(d * 1000 + k);
    writer.addSequence(tokens);
    writer.endDocument();
  }
  writer.finish();
  return prefix;
}

}  // namespace

TEST_CASE("gpt samples: NeoX's split rule over documents") {
  const auto ranges = splitDocuments("969,30,1", 1000);
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0] == std::pair<size_t, size_t>{0, 969});
  CHECK(ranges[1] == std::pair<size_t, size_t>{969, 999});
  CHECK(ranges[2] == std::pair<size_t, size_t>{999, 1000});
  CHECK(splitDocuments("1", 10)[0] == std::pair<size_t, size_t>{0, 10});
  CHECK(splitDocuments("1", 10)[1].first == splitDocuments("1", 10)[1].second);
  for (const char* bad : {"0,0,0", "a,1", "1,2,3,4", "-1,2", ""})
    CHECK_THROWS_AS(splitDocuments(bad, 10), ds::Error);
  CHECK_THROWS_WITH(splitDocuments("1,x", 10),
                    Catch::Contains("\"x\" is not a non-negative number"));
}

TEST_CASE("gpt samples: windows of the shuffled stream, overlapping by one token") {
  const std::vector<size_t> lengths = {7, 0, 13, 5, 21, 9, 2};
  size_t total = 0;
  for (size_t length : lengths) total += length;  // 57
  const IndexedDataset data(writeDocuments(lengths));
  const size_t seq = 8, samples = (total - 1) / seq;  // within one epoch
  const GptSamples set(data, {0, lengths.size()}, seq, samples, 1234);
  CHECK(set.epochs() == 1);
  std::set<int32_t> covered;
  for (size_t i = 0; i < set.size(); ++i) {
    const auto tokens = set.sample(i);
    REQUIRE(tokens.size() == seq + 1);
    for (size_t k = 1; k < tokens.size(); ++k) {
      const int32_t doc = tokens[k - 1] / 1000, pos = tokens[k - 1] % 1000;
      const bool sameDocument = tokens[k] == tokens[k - 1] + 1;
      const bool nextDocument =
          pos == static_cast<int32_t>(lengths[doc]) - 1 && tokens[k] % 1000 == 0;
      INFO("sample " << i << " token " << k << ": " << tokens[k - 1] << " -> " << tokens[k]);
      CHECK((sameDocument || nextDocument));
    }
    covered.insert(tokens.begin(), tokens.end());
  }
  // Consecutive samples share one token: S samples of L + 1 cover S * L + 1 distinct tokens.
  CHECK(covered.size() == samples * seq + 1);
}

TEST_CASE("gpt samples: the same seed gives the same samples, epochs reshuffle") {
  const IndexedDataset data(writeDocuments({10, 10, 10, 10, 10}));
  const GptSamples a(data, {0, 5}, 4, 40, 7), b(data, {0, 5}, 4, 40, 7), c(data, {0, 5}, 4, 40, 8);
  CHECK(a.epochs() == 4);  // 40 samples x 4 new tokens + 1 > 3 epochs of 50
  bool differ = false;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a.sample(i) == b.sample(i));
    differ = differ || a.sample(i) != c.sample(i);
  }
  CHECK(differ);
  CHECK_THROWS_WITH(GptSamples(data, {0, 1}, 10, 1, 7),
                    Catch::Contains("not enough for one sample"));
  CHECK_THROWS_AS(GptSamples(data, {3, 9}, 4, 1, 7), ds::Error);
}
