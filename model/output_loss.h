// The output layer and its cross-entropy over vocabulary-parallel logits, as Megatron
// computes them (its output_layer and vocab_parallel_cross_entropy): logits = x W^T over
// this rank's rows [vocab_start, vocab_start + local_vocab) of W, and each row's
// cross-entropy from the tensor-parallel group's maxima, sums of exponentials and target
// logits, never gathering the logits. The model's head and every multi-token prediction
// depth (model/mtp_block.h) compute their losses through it, sharing one W.
#ifndef CONVEYOR_MODEL_OUTPUT_LOSS_H_
#define CONVEYOR_MODEL_OUTPUT_LOSS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/masked_loss.h"
#include "model/parameter.h"
#include "model/tensor_parallel.h"
#include "runtime/ops.h"

namespace conveyor {

// What the backward of one loss needs.
struct OutputLossStash {
  std::vector<int32_t> labels;        // one per row of this rank's tokens
  std::vector<float> loss_mask;       // empty: every row's loss counts
  Tensor in_full, logits, logsumexp;  // logits become their gradient
};

class OutputLoss {
 public:
  // `weight` ([padded vocab, hidden], this rank's vocabulary rows) is the output layer's
  // or the tied word embedding; it, `ops` and `tp` must outlive this object.
  OutputLoss(const Ops* ops, const TensorParallel* tp, Parameter* weight, int64_t hidden,
             int64_t local_vocab);

  // The masked sum and count of the cross-entropies of x's rows ([this rank's rows,
  // hidden]: its sequence shard under SP) against `labels`; `loss_mask` and `labels` hold
  // one entry per token of the micro-batch here (mask empty: all count).
  absl::StatusOr<MaskedLoss> Forward(const Tensor& x, std::vector<int32_t> labels,
                                     std::vector<float> loss_mask, OutputLossStash* stash) const;
  // The gradient of token_weight * (the masked sum) with respect to x; accumulates W's
  // gradient and empties the stash.
  absl::StatusOr<Tensor> Backward(float token_weight, OutputLossStash* stash);

  int64_t vocab_start() const { return tp_->rank() * local_vocab_; }

 private:
  const Ops* ops_;
  const TensorParallel* tp_;
  Parameter* weight_;
  int64_t hidden_;
  int64_t local_vocab_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_OUTPUT_LOSS_H_
