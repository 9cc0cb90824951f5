#include "common/dtype.h"

#include "common/error.h"

namespace ds {

const char* dtypeName(DType type) {
  switch (type) {
    case DType::F32:
      return "fp32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "fp16";
  }
  return "?";
}

DType parseDType(const std::string& text, const std::string& where) {
  if (text == "fp32" || text == "float32" || text == "float") return DType::F32;
  if (text == "bf16" || text == "bfloat16") return DType::BF16;
  if (text == "fp16" || text == "float16" || text == "half") return DType::F16;
  throw Error(where + ": unknown data type \"" + text + "\" (use fp32, bf16 or fp16)");
}

}  // namespace ds
