#include "model/output_loss.h"

#include <cmath>
#include <utility>

#include "base/status_macros.h"

namespace conveyor {

OutputLoss::OutputLoss(const Ops* ops, const TensorParallel* tp, Parameter* weight, int64_t hidden,
                       int64_t local_vocab)
    : ops_(ops), tp_(tp), weight_(weight), hidden_(hidden), local_vocab_(local_vocab) {}

absl::StatusOr<MaskedLoss> OutputLoss::Forward(const Tensor& x, std::vector<int32_t> labels,
                                               std::vector<float> loss_mask,
                                               OutputLossStash* stash) const {
  const int64_t rows = static_cast<int64_t>(labels.size());
  stash->labels = std::move(labels);
  stash->loss_mask = std::move(loss_mask);
  ASSIGN_OR_RETURN(stash->in_full, tp_->EnterForward(x));
  stash->logits = ops_->NewActivation({rows, local_vocab_});
  ops_->Gemm(false, true, rows, local_vocab_, hidden_, 1.0f, stash->in_full,
             weight_->compute_value(), 0.0f, &stash->logits);

  std::vector<double> row_max(rows), sum_exp(rows), target(rows);
  ops_->RowMaxSumExpAndTarget(stash->logits, stash->labels, vocab_start(), absl::MakeSpan(row_max),
                              absl::MakeSpan(sum_exp), absl::MakeSpan(target));
  if (tp_->size() > 1) {
    // Each rank's sum is relative to its own max: rescale to the global one,
    // S = sum_r S_r exp(m_r - m), before summing.
    std::vector<double> global_max = row_max;
    RETURN_IF_ERROR(tp_->comm()->AllReduceMax(global_max.data(), rows));
    for (int64_t r = 0; r < rows; ++r) sum_exp[r] *= std::exp(row_max[r] - global_max[r]);
    row_max = std::move(global_max);
    RETURN_IF_ERROR(tp_->comm()->AllReduceSum(sum_exp.data(), rows));
    RETURN_IF_ERROR(tp_->comm()->AllReduceSum(target.data(), rows));
  }
  stash->logsumexp = Tensor::Zeros({rows}, MemoryCategory::kActivations);
  MaskedLoss loss;
  for (int64_t r = 0; r < rows; ++r) {
    const double lse = row_max[r] + std::log(sum_exp[r]);
    stash->logsumexp.data()[r] = static_cast<float>(lse);
    if (!stash->loss_mask.empty() && stash->loss_mask[r] == 0.0f) continue;
    loss.sum += lse - target[r];
    ++loss.tokens;
  }
  return loss;
}

absl::StatusOr<Tensor> OutputLoss::Backward(float token_weight, OutputLossStash* stash) {
  const int64_t rows = static_cast<int64_t>(stash->labels.size());
  // Masked tokens get no gradient; the others weigh token_weight.
  ops_->CrossEntropyBackward(stash->labels, absl::MakeConstSpan(stash->logsumexp.data(), rows),
                             vocab_start(), token_weight, stash->loss_mask, &stash->logits);
  const Tensor& d_logits = stash->logits;
  Tensor d_in_partial = ops_->NewActivation({rows, hidden_});
  ops_->Gemm(false, false, rows, hidden_, local_vocab_, 1.0f, d_logits, weight_->compute_value(),
             0.0f, &d_in_partial);
  ops_->Gemm(true, false, local_vocab_, hidden_, rows, 1.0f, d_logits, stash->in_full, 1.0f,
             &weight_->grad);
  ASSIGN_OR_RETURN(Tensor dx, tp_->EnterBackward(std::move(d_in_partial)));
  *stash = OutputLossStash();
  return dx;
}

}  // namespace conveyor
