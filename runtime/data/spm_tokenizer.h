// NeoX's SPMTokenizer: a SentencePiece model (`vocab-file`, e.g. LLaMA's tokenizer.model) through
// Debian's libsentencepiece, called as NeoX's SentencePieceTokenizer calls the Python binding.
// Only a factory here, so sentencepiece's headers stay in spm_tokenizer.cc.
#pragma once

#include <memory>
#include <string>

#include "runtime/data/tokenizer.h"

namespace ds::runtime {

// As NeoX: encode adds no BOS/EOS; the vocabulary size is the model's piece count; the
// end-of-document id is the piece "<|endoftext|>", or <unk>'s id when the model has no such piece
// (LLaMA's has none, so NeoX appends <unk>, id 0, after each document). Invalid UTF-8 is
// SentencePiece's to handle: each bad byte reads as U+FFFD (byte pieces with byte_fallback).
// Decoding drops ids outside the vocabulary; control pieces (<s>, </s>) decode to nothing.
// Throws ds::Error naming the file when it cannot be read or is not a SentencePiece model.
std::unique_ptr<Tokenizer> makeSpmTokenizer(const std::string& modelFile);

}  // namespace ds::runtime
