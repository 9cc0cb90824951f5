// Training samples for a GPT from an indexed dataset, as GPT-NeoX builds them: the documents of a
// split, in an order shuffled from the seed (a new order each epoch), are read as one token stream
// cut into samples of seq_length + 1 tokens (inputs and shifted targets; consecutive samples
// share one token), and the samples themselves are visited in a shuffled order. Everything
// depends only on (dataset, split, seq_length, sample count, seed), so every rank and a resumed
// run see the same samples at the same positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/indexed_dataset.h"

namespace ds::runtime {

// "969,30,1" -> the document ranges [begin, end) of train, validation and test, split by those
// weights (NeoX's split rule: cumulative fractions of the document count, rounded). Throws
// ds::Error for anything but 1-3 non-negative weights with a positive sum.
std::vector<std::pair<size_t, size_t>> splitDocuments(const std::string& split, size_t documents);

// The tokens of documents [begin, end) of `data`: GptSamples' precondition, that they make at least
// one sample of seqLength + 1 tokens, checked from the index alone (jobs check it before building
// any sample table). Throws ds::Error "the split's documents hold N tokens, not enough for one
// sample of M", for the caller to name the dataset and split in front of.
size_t checkSampleable(const IndexedDataset& data, std::pair<size_t, size_t> documents,
                       size_t seqLength);

// What a GPT job reads its batches from: sample i, i < size(), of seq-length + 1 tokens. One
// dataset's samples (GptSamples) or several blended by weight (blended_samples.h).
class TokenSamples {
 public:
  virtual ~TokenSamples() = default;
  virtual size_t size() const = 0;
  virtual std::vector<int32_t> sample(size_t i) const = 0;
  // With label datasets (runtime/data/label_dataset.h): sample i's seq-length + 1 labels, read
  // at its tokens' positions; negative ones are masked out of the loss.
  virtual bool hasLabels() const { return false; }
  virtual std::vector<int32_t> labels(size_t i) const;
};

class GptSamples final : public TokenSamples {
 public:
  // `samples` samples of seqLength + 1 tokens over documents [begin, end) of `data`, whose
  // sequences are read as that many documents. Throws ds::Error when the range holds no tokens.
  // `labels`, when given, lines up with `data` (checkLabelsAligned) and outlives this object.
  GptSamples(const IndexedDataset& data, std::pair<size_t, size_t> documents, size_t seqLength,
             size_t samples, uint64_t seed, const IndexedDataset* labels = nullptr);

  size_t size() const override { return shuffle_.size(); }
  size_t epochs() const { return epochs_; }
  std::vector<int32_t> sample(size_t i) const override;  // seqLength + 1 tokens
  bool hasLabels() const override { return labels_ != nullptr; }
  std::vector<int32_t> labels(size_t i) const override;

 private:
  std::vector<int32_t> read(const IndexedDataset& from, size_t i) const;

  const IndexedDataset& data_;
  const IndexedDataset* labels_;
  size_t seqLength_;
  size_t epochs_ = 0;
  std::vector<uint32_t> documentOrder_;                 // sequence ids, epoch after epoch
  std::vector<std::pair<size_t, size_t>> sampleStart_;  // (position in documentOrder_, offset)
  std::vector<uint64_t> shuffle_;
};

}  // namespace ds::runtime
