// Conveyor's GPT parameters <-> the weights of Hugging Face's Llama-family decoders
// (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, which store them alike).
//
// Both compute the same function for a model with rotary positions, RMSNorm, SwiGLU
// and bias-free linears (q/k/v biases for Qwen2); only the storage differs:
//   - HF keeps q_proj, k_proj and v_proj apart ([heads * d | groups * d | groups * d]
//     rows); Conveyor fuses them into one qkv matrix grouped as Megatron does, per
//     key/value group its query heads, then its key head, then its value head, so a
//     group's rows stay on one tensor-parallel rank;
//   - HF keeps gate_proj and up_proj apart; Conveyor's fc1 is [gate | up];
//   - Conveyor's vocabulary is padded (PaddedVocabSize): padding rows are dropped on
//     export and zero on import.
// Linear weights are [out, in] in both, so nothing is transposed.
//
// Rotary layout: this is the one place that decides it. HF's Llama-family files
// rotate each head in halves (rotate_half: channel i pairs with i + d/2), and so does
// Conveyor's RoPE (runtime/cpu/rope.cc, runtime/cuda/rope_kernels.cu, as Megatron's
// default): q and k rows map one to one. Only checkpoints in the interleaved layout
// (channel 2i pairs with 2i + 1: Meta's original Llama files) would need the
// permutation transformers' converter applies, and they are not HF folders.
#ifndef CONVEYOR_TRAINER_HF_LLAMA_MAPPING_H_
#define CONVEYOR_TRAINER_HF_LLAMA_MAPPING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "trainer/hf/gpt2_mapping.h"
#include "trainer/hf/mla_mapping.h"
#include "trainer/hf/moe_mapping.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {

// The sizes the mapping needs.
struct LlamaDims {
  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t groups = 0;  // key/value heads
  int64_t head_dim = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;         // HF's vocab_size
  int64_t padded_vocab = 0;  // rows of Conveyor's word embedding
  bool tied = false;
  bool qkv_bias = false;
  bool qk_norm = false;  // Qwen3's q_norm / k_norm (--qk-layernorm)
  HfMoeDims moe;         // the MoE layers (Mixtral, Qwen-MoE, DeepSeek-V3); none in a dense model
  HfMlaDims mla;         // DeepSeek-V3's multi-latent attention instead of q/k/v
  int64_t mtp_layers = 0;  // DeepSeek-V3's multi-token prediction depths (layers N, N+1, ...)
};

// From a resolved config whose model is Llama-family (rope, RMSNorm, SwiGLU,
// --disable-bias-linear, --rotary-percent 1, a vocabulary size; MoE settings a Mixtral or
// Qwen-MoE or DeepSeek-V3 router computes: HfMoeDimsFromConfig; multi-latent attention with
// its latents' norms: HfMlaDimsFromConfig); otherwise FailedPrecondition listing
// every mismatch with the flag to change.
absl::StatusOr<LlamaDims> LlamaDimsFromConfig(const Config& config, int64_t padded_vocab);

// Conveyor's parameter names and global shapes for `dims`.
std::map<std::string, std::vector<int64_t>> LlamaParameterShapes(const LlamaDims& dims);

// Conveyor -> HF names ("model.layers.0.self_attn.q_proj.weight", ...) and layouts;
// lm_head.weight only for an untied model. InvalidArgument naming a missing or
// wrongly sized tensor.
absl::StatusOr<HfTensorMap> ConveyorToHfLlama(const GlobalTensorMap& tensors,
                                              const LlamaDims& dims);

// DeepSeek-V3's multi-token prediction depths hold copies of the shared embedding and
// output layer (model.layers.{N+k}.embed_tokens and .shared_head.head): (copy, the HF
// tensor it copies). An import reads the originals and compares the copies with them
// (mtp_shared_copies.h); an export writes both.
std::vector<std::pair<std::string, std::string>> MtpSharedCopies(const LlamaDims& dims);

// The HF tensors that hold the Conveyor tensors named in `wanted` (every one when
// null, with the multi-token prediction depths' copies of the embedding and output
// layer, which are never read): what a rank holding only those must read.
std::set<std::string> LlamaHfSources(const LlamaDims& dims, const std::set<std::string>* wanted);

// HF -> Conveyor for only the elements a rank keeps: `wanted` maps Conveyor tensors to
// the global flat indices of their local elements (GlobalIndices, in local order); the
// values come back in that order, read through `read` one run at a time (consecutive
// elements of one row are consecutive in the HF tensor too), so a tensor-parallel rank
// reads its rows or columns and nothing else. Padding rows are 0. InvalidArgument naming
// the tensor for a missing or wrongly shaped HF tensor, or an unknown Conveyor one.
absl::StatusOr<std::map<std::string, std::vector<float>>> HfToConveyorLlamaElements(
    const LlamaDims& dims, const std::map<std::string, std::vector<int64_t>>& wanted,
    const HfShapeOf& shape_of, const HfRangeReader& read);

// HF -> Conveyor, for the Conveyor tensors named in `wanted` (every one when null;
// `tensors` then needs only their LlamaHfSources). Ignores rotary_emb.inv_freq buffers
// (older saves) and, for a tied model, lm_head.weight when it equals the embedding.
// InvalidArgument naming the tensor for a missing, unexpected or wrongly shaped one.
absl::StatusOr<GlobalTensorMap> HfToConveyorLlama(const HfTensorMap& tensors, const LlamaDims& dims,
                                                  const std::set<std::string>* wanted = nullptr);

// Whether a tensor name in an HF file is a buffer, not a weight (never loaded).
bool IsLlamaBuffer(const std::string& hf_name);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_LLAMA_MAPPING_H_
