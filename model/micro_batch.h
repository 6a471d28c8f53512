// Which micro-batch a forward or backward pass works on. The global sample index and
// the iteration key the dropout masks, so any layout draws the single-rank masks.
#ifndef CONVEYOR_MODEL_MICRO_BATCH_H_
#define CONVEYOR_MODEL_MICRO_BATCH_H_

#include <cstdint>
#include <vector>

namespace conveyor {

// Megatron's get_ltor_masks_and_position_ids for one micro-batch's whole samples,
// row-major [batch * seq] over global positions (empty: not asked for).
struct DocumentMasks {
  std::vector<float> loss_mask;         // --eod-mask-loss: 0 on eod inputs, else 1
  std::vector<int32_t> position_ids;    // --reset-position-ids
  std::vector<int32_t> document_start;  // --reset-attention-mask: index in the sample of
                                        // the first token of the token's document
};

struct MicroBatchContext {
  int64_t iteration = 0;     // optimizer step, 1-based
  int64_t first_sample = 0;  // global index (within the step) of the first sample
  int64_t batch = 1;         // samples in this micro-batch
  int64_t seq = 1;           // tokens per sample
  bool training = true;      // false: evaluation, no dropout
  const DocumentMasks* documents = nullptr;  // null: none (owned by the MicroBatchInput)
  // Context parallelism: this rank's place among the cp_size ranks that share each
  // sample's tokens (1: the whole sample is here), the size and rank of the model's
  // context-parallel group (model/model_groups.h; GptStage sets them from it). Which
  // tokens this rank holds: model/context_shard.h.
  int cp_size = 1;
  int cp_rank = 0;
  // Tokens of each sample held here, and the rows they make (before sequence parallelism).
  int64_t local_seq() const { return seq / cp_size; }
  int64_t tokens() const { return batch * local_seq(); }
  // Dropout probability `p` in training, 0 in evaluation (Megatron's model.eval()).
  float Dropout(float p) const { return training ? p : 0.0f; }
};

// The position of each of `rows` consecutive rows of this rank's rows from `first_row`
// (under context parallelism, rows of its chunks: model/context_shard.h): the
// document's --reset-position-ids positions when asked for, else the position within
// the sample. The one place positions come from (learned
// position rows and RoPE both read it).
std::vector<int32_t> RowPositions(const MicroBatchContext& mb, int64_t first_row, int64_t rows);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MICRO_BATCH_H_
