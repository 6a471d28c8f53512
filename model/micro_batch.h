// Which micro-batch a forward or backward pass works on. The global sample index and
// the iteration key the dropout masks, so any layout draws the single-rank masks.
#ifndef CONVEYOR_MODEL_MICRO_BATCH_H_
#define CONVEYOR_MODEL_MICRO_BATCH_H_

#include <cstdint>

namespace conveyor {

struct MicroBatchContext {
  int64_t iteration = 0;     // optimizer step, 1-based
  int64_t first_sample = 0;  // global index (within the step) of the first sample
  int64_t batch = 1;         // samples in this micro-batch
  int64_t seq = 1;           // tokens per sample

  int64_t tokens() const { return batch * seq; }
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MICRO_BATCH_H_
