// Element types of tensors and the fp32 <-> bf16 conversions every backend shares.
#ifndef CONVEYOR_RUNTIME_DTYPE_H_
#define CONVEYOR_RUNTIME_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace conveyor {

enum class DType { kFloat32, kBFloat16 };

inline size_t SizeOf(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

inline absl::string_view DTypeName(DType dtype) {
  return dtype == DType::kFloat32 ? "fp32" : "bf16";
}

// bf16 is the upper half of an IEEE fp32: 1 sign, 8 exponent, 7 mantissa bits.
struct BFloat16 {
  uint16_t bits;
};

// Rounds to nearest, ties to even, as the hardware conversions do; NaN stays NaN
// (a quiet NaN, since truncating a signalling NaN's payload could make it inf).
inline BFloat16 ToBFloat16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof(u));
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return BFloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}

inline float ToFloat(BFloat16 value) {
  const uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_DTYPE_H_
