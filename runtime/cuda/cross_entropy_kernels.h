// The three passes of the vocabulary-parallel softmax cross-entropy on the device
// (runtime/cpu/cross_entropy.h). Each reads the logits in their own dtype (bf16 in
// training): no fp32 copy of the [rows, vocab] matrix is ever made, and backward writes
// the gradient over the logits in place.
#ifndef CONVEYOR_RUNTIME_CUDA_CROSS_ENTROPY_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_CROSS_ENTROPY_KERNELS_H_

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor::cuda {

// row_max[r] = max_v logits[r, v] (device fp32 [rows]; exact, as a max is).
void LaunchRowMax(DType dtype, const void* logits, int64_t rows, int64_t vocab, float* row_max);

// sum_exp[r] = sum_v exp(z[r, v] - row_max[r]) (fp32 exponentials summed in fp64, as the
// CPU), target[r] = z[r, labels[r] - vocab_start] or 0 outside this rank's range.
// labels, row_max: device [rows]; sum_exp, target: device fp64 [rows].
void LaunchSumExpAndTarget(DType dtype, const void* logits, const int32_t* labels, int64_t rows,
                           int64_t vocab, int64_t vocab_start, const float* row_max,
                           double* sum_exp, double* target);

// logits[r, v] = s_r exp(z - logsumexp[r]) - s_r [v == labels[r] - vocab_start], with
// s_r = scale * loss_mask[r] (loss_mask: device [rows], or null for all ones).
void LaunchCrossEntropyBackward(DType dtype, const int32_t* labels, const float* logsumexp,
                                const float* loss_mask, int64_t rows, int64_t vocab,
                                int64_t vocab_start, float scale, void* logits);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_CROSS_ENTROPY_KERNELS_H_
