// Dropout's random draws on the device: a CounterRng's (seed, stream) as a kernel
// argument, and the draws themselves through the Philox code the CPU generator uses
// (runtime/philox_rounds.h), so that a GPU run drops exactly the elements a CPU run drops.
#ifndef CONVEYOR_RUNTIME_CUDA_PHILOX_UNIFORM_H_
#define CONVEYOR_RUNTIME_CUDA_PHILOX_UNIFORM_H_

#include <cstdint>

#include "runtime/philox.h"
#include "runtime/philox_rounds.h"

namespace conveyor::cuda {

// The (seed, stream) pair a CounterRng is keyed by.
struct PhiloxKey {
  uint64_t seed;
  uint64_t stream;
};

inline PhiloxKey KeyOf(const CounterRng& rng) { return {rng.seed(), rng.stream()}; }

// CounterRng(seed, stream).Uniform(index).
CONVEYOR_HOST_DEVICE float PhiloxUniform(PhiloxKey key, uint64_t index) {
  return ::conveyor::PhiloxUniform(key.seed, key.stream, index);
}

// Dropout of element `index` with probability p: kept when its uniform is >= p.
CONVEYOR_HOST_DEVICE bool DropoutKeeps(PhiloxKey key, uint64_t index, float p) {
  return PhiloxUniform(key, index) >= p;
}

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_PHILOX_UNIFORM_H_
