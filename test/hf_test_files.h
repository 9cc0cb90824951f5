// A tokenizer.json for tests, in pythia's layout, built in code (nlohmann::json) so that a test
// can change any field before writing it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/bpe_test_files.h"

namespace ds::test {

// A file laid out as pythia's and NeoX-20B's 20B_tokenizer.json is (that file cannot be fetched
// here; the layout is written from its published format): "1.0", added tokens with every field,
// the specials at ids 0 and 1 also in the model's vocabulary, runs of spaces as non-special
// added tokens after the model's ids, merges as "a b" strings, every byte a token.
inline nlohmann::json pythiaStyle() {
  nlohmann::json vocab = nlohmann::json::object();
  vocab["<|endoftext|>"] = 0;
  vocab["<|padding|>"] = 1;
  int next = 2;
  for (int b = 0; b < 256; ++b) vocab[gpt2Char(static_cast<unsigned char>(b))] = next++;
  const std::vector<std::string> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he",
                                           "\xC4\xA0 \xC4\xA0"};
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    vocab[m.substr(0, space) + m.substr(space + 1)] = next++;
  }
  const auto added = [](int id, const std::string& content, bool special, bool normalized) {
    return nlohmann::json{
        {"id", id},        {"special", special}, {"content", content},      {"single_word", false},
        {"lstrip", false}, {"rstrip", false},    {"normalized", normalized}};
  };
  nlohmann::json addedTokens = nlohmann::json::array(
      {added(0, "<|endoftext|>", true, false), added(1, "<|padding|>", true, false)});
  for (int spaces = 24; spaces >= 2; --spaces)
    addedTokens.push_back(
        added(next++, std::string(static_cast<size_t>(spaces), ' '), false, true));
  const nlohmann::json byteLevel = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", addedTokens},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", byteLevel},
          {"post_processor", byteLevel},
          {"decoder", byteLevel},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace ds::test
