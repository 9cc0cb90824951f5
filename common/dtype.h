// The element types buffers carry: fp32, and bf16/fp16 stored as 16-bit patterns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds {

enum class DType : uint8_t { F32, BF16, F16 };

constexpr size_t dtypeBytes(DType type) { return type == DType::F32 ? 4 : 2; }
const char* dtypeName(DType type);  // "fp32", "bf16", "fp16"
// Accepts the names above (and DeepSpeed's "float32", "bfloat16", "float16", "fp32"...);
// anything else is a ds::Error listing them, with `where` (a flag or config key) in front.
DType parseDType(const std::string& text, const std::string& where);

}  // namespace ds
