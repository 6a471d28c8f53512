// Where training samples come from: an indexable sequence of fixed-length token
// windows, the contract between the data pipeline and the training loop.
#ifndef CONVEYOR_DATA_SAMPLE_SOURCE_H_
#define CONVEYOR_DATA_SAMPLE_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace conveyor {

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  // Number of distinct samples before the source wraps around.
  virtual int64_t size() const = 0;

  // Sample `index` (taken modulo size()): seq_length + 1 token ids, so that
  // tokens [0, seq_length) are the inputs and [1, seq_length] the labels.
  virtual absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_SAMPLE_SOURCE_H_
