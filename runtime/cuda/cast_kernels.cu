#include <algorithm>
#include <cstdint>

#include "runtime/cuda/cast_kernels.h"

namespace conveyor {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// Round to nearest, ties to even, on the bit pattern u of an fp32:
//   bf16 = (u + 0x7fff + ((u >> 16) & 1)) >> 16
// Adding 0x7fff rounds up exactly when the dropped 16 bits exceed half an ulp; the
// extra lsb term breaks the exact-half tie towards an even result. A carry out of the
// mantissa correctly bumps the exponent (and overflows to inf). NaNs become quiet
// NaNs keeping the sign and upper payload. This mirrors ToBFloat16 in
// runtime/dtype.h; we do not use the hardware cvt.rn.bf16.f32 because it returns a
// canonical NaN (0x7fff) instead, which would break bit-exactness with the CPU.
__device__ __forceinline__ uint16_t FloatBitsToBFloat16Bits(uint32_t u) {
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

__global__ void FloatToBFloat16Kernel(const float* __restrict__ in, BFloat16* __restrict__ out,
                                      int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i].bits = FloatBitsToBFloat16Bits(__float_as_uint(in[i]));
  }
}

// fp32 = bf16 << 16: the dropped mantissa bits are zero, so this is exact.
__global__ void BFloat16ToFloatKernel(const BFloat16* __restrict__ in, float* __restrict__ out,
                                      int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = __uint_as_float(static_cast<uint32_t>(in[i].bits) << 16);
  }
}

unsigned int NumBlocks(int64_t n) {
  return static_cast<unsigned int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace

cudaError_t LaunchFloatToBFloat16(const float* in, BFloat16* out, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr) return cudaErrorInvalidValue;
  FloatToBFloat16Kernel<<<NumBlocks(n), kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchBFloat16ToFloat(const BFloat16* in, float* out, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr) return cudaErrorInvalidValue;
  BFloat16ToFloatKernel<<<NumBlocks(n), kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

}  // namespace conveyor
