// Only in the SentencePiece fuzzer of a DS_FUZZ build. spm_tokenizer.cc loads libds_spm.so with
// RTLD_DEEPBIND so that libsentencepiece's protobuf-lite does not bind to gRPC's libprotobuf in
// ds-launch and ds-worker; AddressSanitizer refuses any RTLD_DEEPBIND load outright
// (google/sanitizers#611). This fuzzer links no libprotobuf, so the flag changes nothing in it:
// this dlopen, which takes the place of ASan's interceptor, drops it and calls the C library's.
#include <dlfcn.h>

extern "C" void* dlopen(const char* file, int flags) {
  using Dlopen = void* (*)(const char*, int);
  static const auto real = reinterpret_cast<Dlopen>(dlsym(RTLD_NEXT, "dlopen"));
  return real(file, flags & ~RTLD_DEEPBIND);
}
