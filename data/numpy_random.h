// numpy's legacy RandomState (MT19937), bit for bit, for the parts that
// Megatron's dataset indices use. Reproducing Megatron's sample order for a
// given seed requires reproducing numpy's generator and its exact bounded
// integer algorithms, not just "a Mersenne Twister".
#ifndef CONVEYOR_DATA_NUMPY_RANDOM_H_
#define CONVEYOR_DATA_NUMPY_RANDOM_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace conveyor {

class NumpyRandomState {
 public:
  // numpy.random.RandomState(seed) for an integer seed in [0, 2^32).
  explicit NumpyRandomState(uint32_t seed);

  uint32_t NextUint32();
  // Two 32-bit draws, high word first (numpy's mt19937 next_uint64).
  uint64_t NextUint64();
  // random_sample(): 53-bit double in [0, 1).
  double RandomSample();

  // A uniform integer in [0, max] by masked rejection (numpy's
  // random_interval, which legacy shuffle uses).
  uint64_t RandomInterval(uint64_t max);
  // randint(low, high) for int64 output: masked rejection on
  // high - 1 - low (legacy RandomState never uses Lemire's method).
  int64_t RandInt(int64_t low, int64_t high);

  // RandomState.shuffle of a 1-d array: Fisher-Yates from the back.
  template <typename T>
  void Shuffle(absl::Span<T> values) {
    for (size_t i = values.size(); i-- > 1;) {
      std::swap(values[i], values[RandomInterval(i)]);
    }
  }
  // RandomState.permutation(n).
  std::vector<int64_t> Permutation(int64_t n);

 private:
  void Regenerate();
  std::array<uint32_t, 624> state_;
  int position_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_NUMPY_RANDOM_H_
