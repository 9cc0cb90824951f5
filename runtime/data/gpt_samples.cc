// GptSamples: document order per epoch, sample starts by walking the token stream, and a sample
// permutation; shuffles are our own Fisher-Yates over std::mt19937_64, whose output the C++
// standard fixes (std::shuffle's is not).
#include "runtime/data/gpt_samples.h"

#include <cmath>
#include <random>
#include <sstream>

#include "common/error.h"

namespace ds::runtime {
namespace {

template <typename T>
void shuffle(std::vector<T>& values, std::mt19937_64& rng) {
  for (size_t i = values.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace

std::vector<std::pair<size_t, size_t>> splitDocuments(const std::string& split, size_t documents) {
  std::vector<double> weights;
  std::stringstream in(split);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    double w = -1;
    try {
      w = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !(w >= 0) || !std::isfinite(w))
      throw Error("split \"" + split + "\": \"" + item + "\" is not a non-negative number");
    weights.push_back(w);
  }
  double sum = 0;
  for (double w : weights) sum += w;
  if (weights.empty() || weights.size() > 3 || !(sum > 0))
    throw Error("split \"" + split +
                "\": expected 1 to 3 comma-separated weights with a positive sum, e.g. 969,30,1");
  while (weights.size() < 3) weights.push_back(0);
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t begin = 0;
  double cumulative = 0;
  for (double w : weights) {
    cumulative += w / sum;
    const size_t end =
        std::min(documents, static_cast<size_t>(std::llround(cumulative * documents)));
    ranges.emplace_back(begin, std::max(begin, end));
    begin = std::max(begin, end);
  }
  ranges.back().second = documents;
  return ranges;
}

size_t checkSampleable(const IndexedDataset& data, std::pair<size_t, size_t> documents,
                       size_t seqLength) {
  const auto [begin, end] = documents;
  if (seqLength == 0) throw Error("seq-length must be at least 1");
  if (end > data.sequences() || begin > end)
    throw Error("documents " + std::to_string(begin) + ".." + std::to_string(end) + " of " +
                std::to_string(data.sequences()));
  size_t tokens = 0;
  for (size_t d = begin; d < end; ++d) tokens += data.sequenceLength(d);
  if (tokens <= seqLength)
    throw Error("the split's documents hold " + std::to_string(tokens) +
                " tokens, not enough for one sample of " + std::to_string(seqLength + 1));
  return tokens;
}

GptSamples::GptSamples(const IndexedDataset& data, std::pair<size_t, size_t> documents,
                       size_t seqLength, size_t samples, uint64_t seed,
                       const IndexedDataset* labels)
    : data_(data), labels_(labels), seqLength_(seqLength) {
  const auto [begin, end] = documents;
  const size_t tokensPerEpoch = checkSampleable(data, documents, seqLength);
  // Enough epochs for `samples` samples; each sample consumes seqLength new tokens.
  epochs_ = static_cast<size_t>((samples * seqLength + 1 + tokensPerEpoch - 1) / tokensPerEpoch);
  std::mt19937_64 rng(seed);
  for (size_t e = 0; e < epochs_; ++e) {
    std::vector<uint32_t> order;
    for (size_t d = begin; d < end; ++d) order.push_back(static_cast<uint32_t>(d));
    shuffle(order, rng);
    documentOrder_.insert(documentOrder_.end(), order.begin(), order.end());
  }
  // Walk the stream: a sample starts where the previous one's last token is.
  size_t position = 0, offset = 0;
  auto skipEmpty = [&] {
    while (position < documentOrder_.size() &&
           offset >= data.sequenceLength(documentOrder_[position])) {
      offset -= data.sequenceLength(documentOrder_[position]);
      ++position;
    }
  };
  for (size_t s = 0; s < samples; ++s) {
    skipEmpty();
    sampleStart_.emplace_back(position, offset);
    offset += seqLength;
  }
  shuffle_.resize(samples);
  for (size_t s = 0; s < samples; ++s) shuffle_[s] = s;
  shuffle(shuffle_, rng);
}

std::vector<int32_t> TokenSamples::labels(size_t) const {
  throw Error("GPT samples: labels asked of samples without label datasets");
}

std::vector<int32_t> GptSamples::sample(size_t i) const { return read(data_, i); }

std::vector<int32_t> GptSamples::labels(size_t i) const {
  if (!labels_) return TokenSamples::labels(i);
  return read(*labels_, i);
}

// Sample i's seqLength + 1 values from `from`: data_ itself, or its label dataset, whose
// sequences have the same lengths.
std::vector<int32_t> GptSamples::read(const IndexedDataset& from, size_t i) const {
  auto [position, offset] = sampleStart_.at(shuffle_.at(i));
  std::vector<int32_t> tokens;
  tokens.reserve(seqLength_ + 1);
  while (tokens.size() < seqLength_ + 1) {
    const uint32_t sequence = documentOrder_.at(position);
    const size_t take =
        std::min(data_.sequenceLength(sequence) - offset, seqLength_ + 1 - tokens.size());
    const auto piece = from.read(sequence, offset, take);
    tokens.insert(tokens.end(), piece.begin(), piece.end());
    ++position;
    offset = 0;
  }
  return tokens;
}

}  // namespace ds::runtime
