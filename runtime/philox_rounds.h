// The arithmetic of Philox4x32-10 (runtime/philox.h), written once for host and device
// code: runtime/philox.cc builds the CPU generator on it, and the CUDA kernels include
// it to draw, bit for bit, the numbers the CPU backend draws. No dependencies, so that
// nvcc compiles it as it is.
#ifndef CONVEYOR_RUNTIME_PHILOX_ROUNDS_H_
#define CONVEYOR_RUNTIME_PHILOX_ROUNDS_H_

#include <cstdint>

#if defined(__CUDACC__)
#define CONVEYOR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CONVEYOR_HOST_DEVICE inline
#endif

namespace conveyor {

// Ten rounds of the Philox4x32 bijection on the counter c[0..3] under key (k0, k1),
// in place: each round multiplies c[0] and c[2] by the round constants, mixes the high
// halves with the other words and the key, and bumps the key by the Weyl constants.
CONVEYOR_HOST_DEVICE void PhiloxRounds(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    const uint32_t next0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0;
    const uint32_t next2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[0] = next0;
    c[1] = static_cast<uint32_t>(p1);
    c[2] = next2;
    c[3] = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9u;  // golden ratio
    k1 += 0xBB67AE85u;  // sqrt(3) - 1
  }
}

// The first word of the block of element `index` in stream `stream` under `seed`
// (counter = (index, stream), key = seed, each split into 32-bit halves, low first).
CONVEYOR_HOST_DEVICE uint32_t PhiloxFirstWord(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t c[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                   static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  PhiloxRounds(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return c[0];
}

// Uniform in [0, 1) from the first word's top 24 bits: a 24-bit integer times 2^-24,
// exact in fp32.
CONVEYOR_HOST_DEVICE float PhiloxUniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(PhiloxFirstWord(seed, stream, index) >> 8) * (1.0f / 16777216.0f);
}

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_PHILOX_ROUNDS_H_
