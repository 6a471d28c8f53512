// Synthetic samples for --mock-data: runs, benchmarks and tests need a data
// source without files. Each token is a pure function of (seed, sample,
// position), so any rank can produce any sample without coordination and a
// resumed run sees the same data. A sample counts through the vocabulary from a
// random start with a random stride in {1, 2, 3}: learnable, so loss falls.
#ifndef CONVEYOR_DATA_MOCK_DATASET_H_
#define CONVEYOR_DATA_MOCK_DATASET_H_

#include <cstdint>
#include <vector>

#include "data/sample_source.h"

namespace conveyor {

class MockSampleSource : public SampleSource {
 public:
  // Tokens are in [0, vocab_size); samples have seq_length + 1 tokens.
  MockSampleSource(int64_t seed, int vocab_size, int seq_length,
                   int64_t num_samples = int64_t{1} << 40);

  int64_t size() const override { return num_samples_; }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override;

 private:
  int64_t seed_;
  int vocab_size_;
  int seq_length_;
  int64_t num_samples_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_MOCK_DATASET_H_
