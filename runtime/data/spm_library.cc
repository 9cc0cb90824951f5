// libds_spm.so: sentencepiece's processor behind the C interface of spm_library_api.h. Nothing
// here throws past the boundary; every sentencepiece status is turned into an error message.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/spm_library_api.h"

namespace {

using sentencepiece::SentencePieceProcessor;

void setError(char* error, size_t errorSize, const std::string& message) {
  if (errorSize == 0) return;
  const size_t n = std::min(message.size(), errorSize - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

const SentencePieceProcessor& processor(const void* model) {
  return *static_cast<const SentencePieceProcessor*>(model);
}

void* load(const char* bytes, size_t size, char* error, size_t errorSize) {
  try {
    auto model = std::make_unique<SentencePieceProcessor>();
    const auto status = model->LoadFromSerializedProto(std::string_view(bytes, size));
    if (!status.ok()) {
      setError(error, errorSize, status.ToString());
      return nullptr;
    }
    return model.release();
  } catch (const std::exception& e) {
    setError(error, errorSize, e.what());
    return nullptr;
  }
}

void release(void* model) { delete static_cast<SentencePieceProcessor*>(model); }

int32_t pieceSize(const void* model) { return processor(model).GetPieceSize(); }

int32_t pieceToId(const void* model, const char* piece, size_t size) {
  return processor(model).PieceToId(std::string_view(piece, size));
}

int encode(const void* model, const char* text, size_t size,
           void (*sink)(void*, const int32_t*, size_t), void* context, char* error,
           size_t errorSize) {
  try {
    std::vector<int> ids;
    const auto status = processor(model).Encode(std::string_view(text, size), &ids);
    if (!status.ok()) {
      setError(error, errorSize, status.ToString());
      return 0;
    }
    static_assert(sizeof(int) == sizeof(int32_t));
    sink(context, reinterpret_cast<const int32_t*>(ids.data()), ids.size());
    return 1;
  } catch (const std::exception& e) {
    setError(error, errorSize, e.what());
    return 0;
  }
}

int decode(const void* model, const int32_t* ids, size_t count,
           void (*sink)(void*, const char*, size_t), void* context, char* error, size_t errorSize) {
  try {
    std::string text;
    const auto status = processor(model).Decode(std::vector<int>(ids, ids + count), &text);
    if (!status.ok()) {
      setError(error, errorSize, status.ToString());
      return 0;
    }
    sink(context, text.data(), text.size());
    return 1;
  } catch (const std::exception& e) {
    setError(error, errorSize, e.what());
    return 0;
  }
}

constexpr DsSpmApi kApi = {load, release, pieceSize, pieceToId, encode, decode};

}  // namespace

extern "C" __attribute__((visibility("default"))) const DsSpmApi* dsSpmApi() { return &kApi; }
