// Hugging Face's Llama-family decoder forward pass in double precision, written from
// transformers' modeling code (modeling_llama.py: separate q/k/v projections, rotate_half
// RoPE, repeat_kv grouped attention, RMSNorm; modeling_qwen3.py's q_norm and k_norm over
// each head before RoPE), with each layer's MLP supplied by the test: the dense SwiGLU MLP
// (SwigluMlp) or a mixture of experts, and optionally each layer's attention (DeepSeek-V3's).
// The independent reference of the Llama-family and MoE import tests.
#ifndef CONVEYOR_TESTS_TRAINER_HF_LLAMA_FORWARD_H_
#define CONVEYOR_TESTS_TRAINER_HF_LLAMA_FORWARD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/trainer/hf/hf_reference.h"
#include "trainer/hf/safetensors.h"

namespace conveyor::testing_util {

struct LlamaSpec {
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double rope_theta = 10000.0;
  double eps = 1e-6;
  bool tied = false;
  bool qkv_bias = false;
  bool qk_norm = false;
};

// Layer `layer`'s MLP on its normalised input h [seq][hidden] (its tensors are under
// "model.layers.<layer>.").
using MlpFn = std::function<Matrix(int64_t layer, const Matrix& h)>;
// Layer `layer`'s attention block (o_proj's output) on its normalised input h.
using AttentionFn = std::function<Matrix(int64_t layer, const Matrix& h)>;

// LlamaMLP: down(silu(gate h) * up h).
Matrix SwigluMlp(const Matrix& h, const HfTensor& gate, const HfTensor& up, const HfTensor& down);

// Adds one tensor of a folder the test writes: add(name, shape, mean), mean 1 for a
// norm's gain and 0 otherwise.
using AddTensorFn =
    std::function<void(const std::string& name, std::vector<int64_t> shape, float mean)>;

// Adds layer `layer`'s norms and attention tensors, in the order the reference tests
// draw their random values: the two norms, q/k/v (and their biases with qkv_bias),
// q_norm/k_norm (with qk_norm), o_proj.
void AddAttentionTensors(const LlamaSpec& spec, int64_t hidden, int64_t layer,
                         const AddTensorFn& add);

// The model's logits and mean cross-entropy for one sequence; `attention` replaces the
// Llama family's attention when given (DeepSeek-V3's multi-latent attention), and
// `last_hidden`, when given, receives the last layer's output (before the final norm).
Reference LlamaForward(const LlamaSpec& spec, const HfTensorMap& tensors,
                       const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels,
                       const MlpFn& mlp, const AttentionFn& attention = nullptr,
                       Matrix* last_hidden = nullptr);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_HF_LLAMA_FORWARD_H_
