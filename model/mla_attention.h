// Multi-latent attention's projections (DeepSeek-V2, Liu et al. 2024, §2.1; the math is
// MlaShape's, model/model_shape.h): from a layer's normed input they build the fused
// attention input that runtime/op_params.h's AttentionShape describes, one query group
// per head, so the attention op, its RoPE, ring attention and the output projection are
// the layer's own. A head's row in that input is
//   [q_rope | q_nope | k_rope | k_nope | v]    (dr | dn | dr | dn | dv wide)
// with the rotated parts first, where the layer's RoPE (a table of dr rotated dims)
// turns them; the dot product of a query and a key is their sum over both parts, so the
// order within a head changes nothing. k_rope is one key part copied into every head:
// its gradient is the sum over the heads.
//
// Tensor parallelism as Megatron splits it: the up-projections (W_uq or W_q, W_ukv) are
// column-parallel by heads; the down-projections (W_dq, W_dkv) and the latents' norms are
// replicated, each rank computing them for all tokens. A rank's gradients of those, and
// of its input, then cover only its heads: the input's are summed by the layer's
// tensor-parallel boundary like a column-parallel layer's, the weights' over the group
// (Parameter::partial_over_heads).
#ifndef CONVEYOR_MODEL_MLA_ATTENTION_H_
#define CONVEYOR_MODEL_MLA_ATTENTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/linear.h"
#include "model/model_shape.h"
#include "model/norm_layer.h"
#include "model/parameter.h"
#include "model/tensor_parallel.h"
#include "runtime/ops.h"

namespace conveyor {

// What the projections keep for one micro-batch between forward and the weight
// gradients ("latent": c_q or c_kv; "normed": after its norm, the same tensor without
// --qk-layernorm). The q_* tensors are empty without a query latent.
struct MlaStash {
  Tensor q_latent, q_normed, kv_latent, kv_normed;
  NormStats q_norm, kv_norm;
  // Gradients: of the query heads (W_uq's or W_q's output), of the key/value heads
  // (W_ukv's output), of the latents after and before their norms, and of W_dkv's output.
  Tensor d_q, d_q_normed, d_q_latent, d_kv, d_kv_normed, d_kv_down;
};

// DeepSeek's softmax scale: 1 / sqrt(qk_head_dim + qk_pos_emb_head_dim), times YaRN's
// m(s, mscale_all_dim)^2 when the frequencies are YaRN's (runtime/rope_scaling.h).
float MlaSoftmaxScale(const ModelShape& shape);

class MlaAttention {
 public:
  // `prefix` names the parameters ("layers.3.attention"); `ops` and `tp` must outlive
  // this object.
  MlaAttention(const Ops* ops, ParameterStore* store, const std::string& prefix,
               const ModelShape& shape, const TensorParallel& tp);

  // The attention input [rows, local qkv width] before RoPE, from x [rows, hidden].
  Tensor Forward(const Tensor& x, MlaStash* stash) const;
  // This rank's share of x's gradient, from the attention input's (after RoPE's inverse).
  Tensor BackwardInput(const Tensor& d_qkv, MlaStash* stash) const;
  // Accumulates the weight gradients.
  void BackwardWeight(const Tensor& x, const MlaStash& stash);

  void AppendParameters(std::vector<Parameter*>* out) const;

 private:
  // The query heads [rows, local heads * (dn + dr)], per head [q_nope | q_rope].
  Tensor QueryHeads(const Tensor& x, MlaStash* stash) const;
  // x's gradient through the query projections.
  Tensor QueryBackward(MlaStash* stash) const;
  // Copies between the fused input and the projections' outputs, per head.
  void Pack(const Tensor& q, const Tensor& kv_down, const Tensor& kv, Tensor* qkv) const;
  void Unpack(const Tensor& d_qkv, Tensor* d_q, Tensor* d_kv_down, Tensor* d_kv) const;

  const Ops* ops_;
  MlaShape mla_;
  int64_t local_heads_;
  // q_down_ and q_up_, or q_ (no query latent); the norms under --qk-layernorm only.
  std::optional<Linear> q_down_;
  std::optional<NormLayer> q_norm_;
  std::optional<Linear> q_up_, q_;
  Linear kv_down_;
  std::optional<NormLayer> kv_norm_;
  Linear kv_up_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MLA_ATTENTION_H_
