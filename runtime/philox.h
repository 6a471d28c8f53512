// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// a counter-based generator: the output is a pure function of (key, counter).
//
// That is what makes "layout never changes the math" possible (docs/design.md §3):
// a value is keyed by (seed, stream) and indexed by its *global* element index, so a
// rank holding any shard of a tensor draws exactly the numbers the single-rank run
// draws for those elements, without drawing the others.
#ifndef CONVEYOR_RUNTIME_PHILOX_H_
#define CONVEYOR_RUNTIME_PHILOX_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace conveyor {

using PhiloxBlock = std::array<uint32_t, 4>;

// Ten rounds of the Philox4x32 bijection on `counter` under `key`.
PhiloxBlock Philox4x32(PhiloxBlock counter, std::array<uint32_t, 2> key);

// 64-bit FNV-1a of a name: turns "layers.3.mlp.fc1.weight" into a stream id.
uint64_t StreamId(absl::string_view name);

// Mixes extra integers (layer, iteration, ...) into a stream id (splitmix64 finaliser).
uint64_t MixStream(uint64_t stream, uint64_t value);

// Random numbers for element `index` of the stream `stream` under `seed`.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

  // Uniform in [0, 1) with 24 random bits.
  float Uniform(uint64_t index) const;
  // Standard normal by Box-Muller on the first two words of the block.
  float Normal(uint64_t index) const;

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  PhiloxBlock Block(uint64_t index) const;
  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_PHILOX_H_
