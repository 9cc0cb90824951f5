// NeoX's dataset blending: the per-dataset sample shares, weight-by-num-documents' weights and the
// greedy blending index against hand-computed values; blended samples read from the dataset the
// index names, in an order fixed by the arguments alone, with their label datasets at the same
// positions; the token-id and label scans ds-config check runs.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/data/blended_samples.h"
#include "runtime/data/data_blend.h"
#include "runtime/data/label_dataset.h"
#include "runtime/data/vocabulary_fit.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;

namespace {

// `documents` documents of `length` tokens, token k of document d = base + d * 1000 + k.
std::string writeTagged(const std::string& dir, const std::string& name, int32_t base,
                        size_t documents, size_t length, TokenType type = TokenType::Int32) {
  const std::string prefix = dir + "/" + name;
  IndexedDatasetWriter writer(prefix, type);
  for (size_t d = 0; d < documents; ++d) {
    std::vector<int32_t> tokens(length);
    for (size_t k = 0; k < length; ++k) tokens[k] = base + static_cast<int32_t>(d * 1000 + k);
    writer.addSequence(tokens);
    writer.endDocument();
  }
  writer.finish();
  return prefix;
}

}  // namespace

TEST_CASE("data blend: NeoX's normalised weights and per-dataset sample counts") {
  // ceil(samples x weight / sum x 1.005)
  const WeightedSamples a = normalizedWeightsAndSamples({3, 1}, 1000);
  CHECK(a.weights == std::vector<double>{0.75, 0.25});
  CHECK(a.samples == std::vector<uint64_t>{754, 252});  // 753.75, 251.25 rounded up
  const WeightedSamples b = normalizedWeightsAndSamples({0.2, 0.5, 0.3}, 4096);
  CHECK(b.samples == std::vector<uint64_t>{824, 2059, 1235});  // 823.296, 2058.24, 1234.944
  CHECK(normalizedWeightsAndSamples({1, 1, 1}, 10).samples == std::vector<uint64_t>{4, 4, 4});
  CHECK(normalizedWeightsAndSamples({0, 2}, 100).samples == std::vector<uint64_t>{0, 101});
  CHECK_THROWS_AS(normalizedWeightsAndSamples({0, 0}, 10), ds::Error);
  // Weights whose sum overflows to +inf are still a blend (they became zeros, and no samples).
  const WeightedSamples huge = normalizedWeightsAndSamples({1e308, 1e308}, 100);
  CHECK(huge.weights == std::vector<double>{0.5, 0.5});
  CHECK(huge.samples == std::vector<uint64_t>{51, 51});
  CHECK(normalizedWeightsAndSamples({1.5e308, 0.5e308, 0}, 4096).samples ==
        std::vector<uint64_t>{3088, 1030, 0});  // 3087.36, 1029.12
  // The scaling by a power of two leaves ordinary weights' quotients NeoX's to the last bit.
  for (const std::vector<double>& w : {std::vector<double>{0.2, 0.5, 0.3}, {3e-5, 7.1, 1e3}}) {
    const WeightedSamples scaled = normalizedWeightsAndSamples(w, 1);
    const double sum = w[0] + w[1] + w[2];
    for (size_t i = 0; i < w.size(); ++i) CHECK(scaled.weights[i] == w[i] / sum);
  }
  CHECK_THROWS_WITH(normalizedWeightsAndSamples({1, std::numeric_limits<double>::infinity()}, 10),
                    Catch::Contains("expected finite non-negative weights"));
  CHECK_THROWS_WITH(normalizedWeightsAndSamples({1, std::nan("")}, 10),
                    Catch::Contains("expected finite non-negative weights"));
}

TEST_CASE("data blend: weight-by-num-documents, NeoX's alpha-smoothed formula") {
  // shares n/N; p = share^alpha / sum; w = p (1 - share) / sum.
  CHECK(weightsByNumDocuments({5}, 0.3) == std::vector<double>{1.0});
  // alpha 1: p = (.25, .75), times (.75, .25): equal.
  const auto even = weightsByNumDocuments({100, 300}, 1.0);
  CHECK(even[0] == Approx(0.5).margin(1e-15));
  CHECK(even[1] == Approx(0.5).margin(1e-15));
  // alpha 0.5: p = (.5, .8660254) / 1.3660254 = (.3660254, .6339746); times (.75, .25) =
  // (.2745190, .1584937) / .4330127.
  const auto root = weightsByNumDocuments({100, 300}, 0.5);
  CHECK(root[0] == Approx(0.6339745962155614).epsilon(1e-12));
  CHECK(root[1] == Approx(0.36602540378443865).epsilon(1e-12));
  // alpha 0.3 over shares (.1, .2, .7): share^.3 = (.501187, .617034, .898523) / 2.016744
  // = (.248507, .305953, .445540); times (.9, .8, .3) = (.223656, .244762, .133662) / .602081.
  const auto three = weightsByNumDocuments({1, 2, 7}, 0.3);
  CHECK(three[0] == Approx(0.37147830526698344).epsilon(1e-12));
  CHECK(three[1] == Approx(0.4065275024073636).epsilon(1e-12));
  CHECK(three[2] == Approx(0.22199419232565293).epsilon(1e-12));
  // All documents in one of two datasets: every weight 0 (NeoX divides by zero there).
  CHECK_THROWS_WITH(weightsByNumDocuments({0, 9}, 1.0),
                    Catch::Contains("weight-by-num-documents: every document is in one dataset"));
  // An alpha under which every share^alpha underflows to 0 (NeoX's 0 / 0): the formula's limit,
  // everything to the largest dataset, not the blame above.
  CHECK(weightsByNumDocuments({1, 40}, 1e308) == std::vector<double>{0.0, 1.0});
  CHECK(weightsByNumDocuments({30, 30, 1}, 2000) == std::vector<double>{0.5, 0.5, 0.0});
}

TEST_CASE("data blend: the blending index takes the dataset furthest behind its share") {
  auto datasets = [](const std::vector<BlendPosition>& index) {
    std::vector<int> out;
    for (const auto& p : index) out.push_back(p.dataset);
    return out;
  };
  auto samples = [](const std::vector<BlendPosition>& index) {
    std::vector<uint64_t> out;
    for (const auto& p : index) out.push_back(p.sample);
    return out;
  };
  // 0.75/0.25: errors at i = 0..7 (position max(i, 1)) traced by hand; i = 4 is a tie (0, 0),
  // which goes to dataset 0.
  const auto a = blendingIndex({0.75, 0.25}, 8);
  CHECK(datasets(a) == std::vector<int>{0, 1, 0, 0, 0, 1, 0, 0});
  CHECK(samples(a) == std::vector<uint64_t>{0, 0, 1, 2, 3, 1, 4, 5});
  const auto b = blendingIndex({0.2, 0.5, 0.3}, 10);
  CHECK(datasets(b) == std::vector<int>{1, 2, 0, 1, 2, 1, 0, 1, 2, 1});
  // NeoX's quirk kept: at i = 1 both errors are 0, so a zero-weight dataset 0 is read once.
  CHECK(datasets(blendingIndex({0.0, 1.0}, 3)) == std::vector<int>{1, 0, 1});
  // Over a long run each dataset stays within a sample of its share.
  const auto c = blendingIndex({0.2, 0.5, 0.3}, 10007);
  std::vector<double> taken(3, 0);
  for (size_t i = 0; i < c.size(); ++i) {
    taken[c[i].dataset] += 1;
    if (i % 97 == 0)
      for (int d = 0; d < 3; ++d)
        CHECK(std::abs(taken[d] - std::vector<double>{0.2, 0.5, 0.3}[d] * (i + 1)) <= 1.0);
  }
  CHECK_THROWS_AS(blendingIndex({}, 1), ds::Error);
  CHECK_THROWS_AS(blendingIndex(std::vector<double>(255, 1.0 / 255), 1), ds::Error);
}

TEST_CASE("data blend: paths and weights are checked as NeoX checks them, naming the key") {
  DataBlend equal{{"a", "b"}, {}};
  validateDataBlend(equal, "train");
  CHECK(equal.weights == std::vector<double>{1.0, 1.0});  // NeoX's default: equal weights
  DataBlend shorter{{"a", "b"}, {1.0}};
  CHECK_THROWS_WITH(validateDataBlend(shorter, "valid"),
                    Catch::Contains("valid-data-weights: expected one weight per entry of "
                                    "valid-data-paths (2), got 1"));
  DataBlend negative{{"a"}, {-1.0}};
  CHECK_THROWS_WITH(validateDataBlend(negative, "train"),
                    Catch::Contains("train-data-weights: expected non-negative numbers"));
  DataBlend zeros{{"a", "b"}, {0.0, 0.0}};
  CHECK_THROWS_WITH(validateDataBlend(zeros, "test"),
                    Catch::Contains("test-data-weights: every weight is 0"));
  DataBlend none{{}, {}};
  CHECK_NOTHROW(validateDataBlend(none, "test"));  // an empty split
}

TEST_CASE("data blend: blended samples come from the dataset the index names, deterministically") {
  const std::string dir = ds::test::makeScratchDir("data-blend");
  const std::string a = writeTagged(dir, "a", 0, 30, 40);
  const std::string b = writeTagged(dir, "b", 1000000, 10, 25);
  const DataBlend blend{{a, b}, {3, 1}};
  const size_t seq = 8;
  const uint64_t samples = 200;
  const BlendedSamples set(blend, {}, seq, samples, 1234);
  REQUIRE(set.size() == 151 + 51);  // ceil(150.75) + ceil(50.25)
  CHECK(set.weights() == std::vector<double>{0.75, 0.25});
  const BlendedSamples again(blend, {}, seq, samples, 1234);
  size_t fromA = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    const auto tokens = set.sample(i);
    REQUIRE(tokens.size() == seq + 1);
    const bool inA = tokens[0] < 1000000;
    CHECK(inA == (set.position(i).dataset == 0));
    for (int32_t t : tokens) CHECK((t < 1000000) == inA);  // one dataset per sample
    if (i < samples) fromA += inA ? 1 : 0;
    CHECK(again.sample(i) == tokens);  // a resumed run rebuilds exactly this order
  }
  CHECK(fromA == 150);
  // Another seed shuffles each dataset's samples, not the blending pattern.
  const BlendedSamples other(blend, {}, seq, samples, 99);
  for (size_t i = 0; i < set.size(); ++i)
    CHECK(other.position(i).dataset == set.position(i).dataset);
  // weight-by-num-documents replaces the given weights: 30 and 10 documents at alpha 1 weigh
  // .75 x .25 and .25 x .75, equal.
  const BlendedSamples byDocs(blend, {true, 1.0}, seq, samples, 1234);
  CHECK(byDocs.weights()[0] == Approx(0.5));
  CHECK(byDocs.weights()[1] == Approx(0.5));
  // A dataset too small for one sample is named.
  const std::string tiny = writeTagged(dir, "tiny", 0, 1, 4);
  CHECK_THROWS_WITH(BlendedSamples(DataBlend{{a, tiny}, {1, 1}}, {}, seq, samples, 1),
                    Catch::Contains(tiny + ": the split's documents hold 4 tokens"));
}

TEST_CASE("data blend: ds-config check's scan finds a token id outside the vocabulary") {
  const std::string dir = ds::test::makeScratchDir("vocab-fit");
  const std::string small = writeTagged(dir, "small", 0, 1, 200, TokenType::UInt16);  // 0..199
  const std::string large = writeTagged(dir, "large", 0, 3, 10, TokenType::UInt16);   // up to 2009
  IndexedDataset data(large);
  const TokenRange r = data.tokenRange();
  CHECK(r.min == 0);
  CHECK(r.max == 2009);
  CHECK(r.maxSequence == 2);
  CHECK(checkTokensFitVocabulary({small}, 200).empty());
  CHECK_THROWS_WITH(checkTokensFitVocabulary({small}, 199),
                    Catch::Contains(small + ".bin: token id 199 (sequence 0) does not fit the "
                                            "tokenizer's vocabulary of 199 ids"));
  CHECK_THROWS_WITH(checkTokensFitVocabulary({small, large}, 256),
                    Catch::Contains(large + ".bin: token id 2009"));
  const std::string negative = writeTagged(dir, "negative", -5, 1, 3);
  CHECK_THROWS_WITH(checkTokensFitVocabulary({negative}, 256),
                    Catch::Contains("token id -5 is negative"));
  CHECK(checkTokensFitVocabulary({dir + "/absent"}, 256) ==
        std::vector<std::string>{dir + "/absent"});
}

TEST_CASE("data blend: label datasets follow their text sample for sample, token for token") {
  const std::string dir = ds::test::makeScratchDir("data-labels");
  const std::string a = writeTagged(dir, "a", 0, 30, 40);
  const std::string b = writeTagged(dir, "b", 1000000, 10, 25);
  // Labels tagged like their text, 500000 above it: a label names the token it sits on.
  const std::string la = writeTagged(dir, "la", 500000, 30, 40);
  const std::string lb = writeTagged(dir, "lb", 1500000, 10, 25);
  DataBlend blend{{a, b}, {3, 1}, {la, lb}};
  const size_t seq = 8;
  const BlendedSamples set(blend, {}, seq, 120, 1234, "train-label-data-paths");
  const BlendedSamples plain(DataBlend{{a, b}, {3, 1}}, {}, seq, 120, 1234);
  REQUIRE(set.hasLabels());
  CHECK_FALSE(plain.hasLabels());
  CHECK_THROWS_WITH(plain.labels(0), Catch::Contains("without label datasets"));
  for (size_t i = 0; i < set.size(); ++i) {
    const auto tokens = set.sample(i), labels = set.labels(i);
    REQUIRE(labels.size() == tokens.size());
    CHECK(tokens == plain.sample(i));  // labels change no sample
    for (size_t k = 0; k < tokens.size(); ++k) CHECK(labels[k] == tokens[k] + 500000);
  }
  // A label dataset whose documents or token counts differ from its text's is named with it.
  const std::string fewer = writeTagged(dir, "fewer", 0, 29, 40);
  const std::string shorter = writeTagged(dir, "shorter", 0, 10, 24);
  CHECK_THROWS_WITH(BlendedSamples(DataBlend{{a, b}, {3, 1}, {fewer, lb}}, {}, seq, 120, 1,
                                   "train-label-data-paths"),
                    Catch::Contains("train-label-data-paths: label dataset " + fewer +
                                    " does not line up with its text dataset " + a +
                                    ": 29 documents against 30"));
  CHECK_THROWS_WITH(BlendedSamples(DataBlend{{a, b}, {3, 1}, {la, shorter}}, {}, seq, 120, 1,
                                   "valid-label-data-paths"),
                    Catch::Contains("valid-label-data-paths: label dataset " + shorter +
                                    " does not line up with its text dataset " + b +
                                    ": sequence 0 has 24 labels against 25 tokens"));
  CHECK_THROWS_WITH(BlendedSamples(DataBlend{{a, b}, {3, 1}, {la}}, {}, seq, 120, 1, "k"),
                    Catch::Contains("k: 1 label datasets for 2 datasets"));
}

TEST_CASE("data blend: ds-config check's label scan: aligned, ids below the vocabulary or masked") {
  const std::string dir = ds::test::makeScratchDir("label-scan");
  const std::string text = writeTagged(dir, "text", 0, 2, 5);  // ids 0..1004
  auto writeLabels = [&](const std::string& name, int32_t top) {
    IndexedDatasetWriter writer(dir + "/" + name, TokenType::Int32);
    for (int d = 0; d < 2; ++d) {
      writer.addSequence({-100, 3, top, -100, 7});
      writer.endDocument();
    }
    writer.finish();
    return dir + "/" + name;
  };
  const std::string fits = writeLabels("fits", 49), over = writeLabels("over", 50);
  CHECK(checkLabelDatasets({text}, {fits}, "train-label-data-paths", 50).empty());
  CHECK_THROWS_WITH(checkLabelDatasets({text}, {over}, "valid-label-data-paths", 50),
                    Catch::Contains("valid-label-data-paths: " + over +
                                    ".bin: label 50 (sequence 0) does not fit the tokenizer's "
                                    "vocabulary of 50 ids") &&
                        Catch::Contains("or negative (-100) to mask it"));
  const std::string longer = writeTagged(dir, "longer", 0, 2, 6);
  CHECK_THROWS_WITH(
      checkLabelDatasets({text}, {longer}, "test-label-data-paths", 5000),
      Catch::Contains("test-label-data-paths: label dataset " + longer) && Catch::Contains(text));
  CHECK(checkLabelDatasets({text}, {dir + "/absent"}, "k", 50) ==
        std::vector<std::string>{dir + "/absent"});
}
