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
  bool training = true;      // false: evaluation, no dropout

  int64_t tokens() const { return batch * seq; }
  // Dropout probability `p` in training, 0 in evaluation (Megatron's model.eval()).
  float Dropout(float p) const { return training ? p : 0.0f; }
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MICRO_BATCH_H_
