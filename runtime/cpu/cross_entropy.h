// Softmax cross-entropy over the vocabulary, one row of logits per token:
//   loss_t = logsumexp(z_t) - z_t[label_t]
//   dz_t   = scale * (softmax(z_t) - onehot(label_t))
// Forward keeps only logsumexp per row, so backward rebuilds the softmax from the
// logits in place instead of storing a second [tokens, vocab] matrix.
#ifndef CONVEYOR_RUNTIME_CPU_CROSS_ENTROPY_H_
#define CONVEYOR_RUNTIME_CPU_CROSS_ENTROPY_H_

#include <cstdint>

namespace conveyor::cpu {

void CrossEntropyForward(const float* logits, const int32_t* labels, int64_t rows,
                         int64_t vocab, float* losses, float* logsumexp);

// Overwrites logits with their gradient; `scale` is d(total loss)/d(loss_t).
void CrossEntropyBackward(const int32_t* labels, const float* logsumexp, int64_t rows,
                          int64_t vocab, float scale, float* logits);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_CROSS_ENTROPY_H_
