// Softmax cross-entropy over a vocabulary that may be split across tensor-parallel
// ranks (Megatron's vocab-parallel cross-entropy: the logits are never gathered).
// A rank holds vocabulary columns [vocab_start, vocab_start + vocab) of each row z_t:
//   m_t    = max over the whole vocabulary     (local RowMax, then max over ranks)
//   S_t    = sum_v exp(z_t[v] - m_t)           (local SumExp, then sum over ranks)
//   loss_t = m_t + log(S_t) - z_t[label_t]     (the target logit lives on one rank)
//   dz_t   = scale * mask_t * (softmax(z_t) - onehot(label_t)),  softmax = exp(z - logsumexp)
// Backward rebuilds the softmax from the logits in place, so no second
// [tokens, vocab] matrix is stored. Rows are split over the thread pool; exponentials
// are vector_math.h's Exp, summed in fp32 lanes over 256 logits and in double beyond.
#ifndef CONVEYOR_RUNTIME_CPU_CROSS_ENTROPY_H_
#define CONVEYOR_RUNTIME_CPU_CROSS_ENTROPY_H_

#include <cstdint>

namespace conveyor::cpu {

void RowMax(const float* logits, int64_t rows, int64_t vocab, double* row_max);

// sum_exp[t] = sum_v exp(z_t[v] - row_max[t]); target[t] = z_t[label_t - vocab_start]
// when the label is in this rank's range, else 0.
void SumExpAndTarget(const float* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                     int64_t vocab_start, const double* row_max, double* sum_exp, double* target);

// The three in one read of each row (online max and sum, the fused form of RowMax then
// SumExpAndTarget): row_max[t] is this rank's max m_t and sum_exp[t] sums exp(z - m_t);
// ranks holding other vocabulary columns combine theirs as
//   m = max_r m_r,  S = sum_r S_r exp(m_r - m).
void RowMaxSumExpAndTarget(const float* logits, const int32_t* labels, int64_t rows,
                           int64_t vocab, int64_t vocab_start, double* row_max, double* sum_exp,
                           double* target);

// Overwrites logits with their gradient; `scale` * loss_mask[t] is d(total loss)/d(loss_t)
// (loss_mask null: 1 for every row).
void CrossEntropyBackward(const int32_t* labels, const float* logsumexp, int64_t rows,
                          int64_t vocab, int64_t vocab_start, float scale,
                          const float* loss_mask, float* logits);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_CROSS_ENTROPY_H_
