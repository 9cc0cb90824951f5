// The C interface between spm_tokenizer.cc and the libds_spm.so module (spm_library.cc), the one
// piece of the project that links Debian's libsentencepiece. That library exports its own copy of
// protobuf-lite, which clashes with gRPC's libprotobuf in one process (a crash at load), so the
// module is dlopen'ed with its own symbol scope and only plain C crosses: no exceptions, no STL.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct DsSpmApi {
  // Each call that can fail returns 0 (or null) and writes a message into error[errorSize].
  void* (*load)(const char* bytes, size_t size, char* error, size_t errorSize);
  void (*release)(void* model);
  int32_t (*pieceSize)(const void* model);
  // <unk>'s id when the model has no such piece, as sentencepiece's PieceToId.
  int32_t (*pieceToId)(const void* model, const char* piece, size_t size);
  // Results are handed to sink (once), so memory never changes hands across the boundary.
  int (*encode)(const void* model, const char* text, size_t size,
                void (*sink)(void* context, const int32_t* ids, size_t count), void* context,
                char* error, size_t errorSize);
  int (*decode)(const void* model, const int32_t* ids, size_t count,
                void (*sink)(void* context, const char* text, size_t size), void* context,
                char* error, size_t errorSize);
};

// The module's one exported symbol.
const DsSpmApi* dsSpmApi();
}

// The module's file name, looked for beside the running executable, then in the build tree.
constexpr const char* kDsSpmLibraryName = "libds_spm.so";
