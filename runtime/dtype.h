// Element types of tensors and the fp32 <-> bf16 conversions every backend shares.
#ifndef CONVEYOR_RUNTIME_DTYPE_H_
#define CONVEYOR_RUNTIME_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace conveyor {

// One element type for tensors and for the messages ranks exchange (parallel/buffer.h):
// tensors hold fp32 or bf16; messages also carry fp64, int32, int64 and bytes.
enum class DType { kFloat32, kBFloat16, kFloat64, kInt32, kInt64, kByte };

inline size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kByte:
      return 1;
  }
  return 1;
}

inline absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "fp32";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat64:
      return "fp64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kByte:
      return "byte";
  }
  return "?";
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

// The element type of a C++ type: DTypeOf<float>::value == DType::kFloat32.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<char> {
  static constexpr DType value = DType::kByte;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_DTYPE_H_
