// Hugging Face's forward-pass building blocks in double precision, written from
// transformers' modeling code (not Conveyor's): the independent reference the
// Hugging Face import tests compare Conveyor's loss and logits against.
#ifndef CONVEYOR_TESTS_TRAINER_HF_HF_REFERENCE_H_
#define CONVEYOR_TESTS_TRAINER_HF_HF_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "trainer/hf/safetensors.h"

namespace conveyor::testing_util {

using Matrix = std::vector<std::vector<double>>;  // [rows][columns]

// nn.Linear: y = x W^T (+ b), W [out, in].
Matrix Linear(const Matrix& x, const HfTensor& w, const HfTensor* b = nullptr);
// GPT-2's Conv1D: y = x W + b, W [in, out].
Matrix Conv1D(const Matrix& x, const HfTensor& w, const HfTensor& b);
// LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * w.
Matrix RmsNorm(const Matrix& x, const HfTensor& w, double eps);
// nn.LayerNorm: (x - mean) / sqrt(var + eps) * w + b.
Matrix LayerNorm(const Matrix& x, const HfTensor& w, const HfTensor& b, double eps);
// Rows of `table` [rows, width] picked by `ids`.
Matrix Rows(const HfTensor& table, const std::vector<int32_t>& ids);
// x += y.
void AddInto(const Matrix& y, Matrix* x);
// Causal softmax(q k^T / sqrt(d)) v per head; query head h reads key/value head
// h / (heads / kv_heads) (repeat_kv). q [seq, heads * d], k and v [seq, kv_heads * d].
Matrix CausalAttention(const Matrix& q, const Matrix& k, const Matrix& v, int64_t heads,
                       int64_t kv_heads, int64_t d);

struct Reference {
  Matrix logits;  // [seq][vocab]
  double loss;    // mean cross-entropy
};
// Logits x E^T for the output embedding E [vocab, hidden], and the mean cross-entropy.
Reference LogitsAndLoss(const Matrix& x, const HfTensor& output_embedding,
                        const std::vector<int32_t>& labels);

// The largest error of Conveyor's logits [reference rows, padded_vocab] (row-major, the
// padding columns ignored) against `reference` [rows][vocab], each relative to
// max(|reference|, 1).
double WorstRelativeLogitError(const Matrix& reference, const float* logits,
                               int64_t padded_vocab);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_HF_HF_REFERENCE_H_
