// What one transformer layer keeps for one micro-batch between its forward and its
// backward, listed once: the layer fills and drops these tensors
// (model/transformer_layer.cc) and the memory model counts them (model/memory_model.cc).
#ifndef CONVEYOR_MODEL_LAYER_STASH_H_
#define CONVEYOR_MODEL_LAYER_STASH_H_

#include <memory>

#include "model/norm_layer.h"
#include "model/recompute.h"
#include "runtime/tensor.h"

namespace conveyor {

struct MoeStash;  // model/moe_layer.h
struct MlaStash;  // model/mla_attention.h

// Activations of one layer for one micro-batch ("full" = all tokens of the micro-batch,
// inside the tensor-parallel region; the others are this rank's sequence shard under
// --sequence-parallel). Forward fills the first block; BackwardInput fills the
// gradients W needs and drops what only B needed.
// `attention` is what the backend keeps for attention's backward (the probabilities on
// the CPU). Under --qk-layernorm, qk_in holds the query heads, then the key heads, as
// they entered their norms, and d_qk their norms' output gradients (empty otherwise).
struct LayerStash {
  Tensor x, ln1_out, ln1_full, qkv, attention, ctx, x1, ln2_out, ln2_full, fc1_out, act;
  NormStats ln1, ln2;
  Tensor d_ln1, d_qkv, d_proj_full, d_ln2, d_fc1, d_fc2_full;
  Tensor qk_in, d_qk;
  NormStats q_norm, k_norm;
  // A mixture-of-experts layer's (model/moe_layer.h) in place of fc1_out ... d_fc2_full.
  std::shared_ptr<MoeStash> moe;
  // Multi-latent attention's projections' (model/mla_attention.h), which build qkv.
  std::shared_ptr<MlaStash> mla;
};

// A stash tensor's rows: this rank's sequence shard (every token without SP), every
// token of the micro-batch, or every token gathered from the shard listed just before
// it (under SP; without it the two are one tensor).
enum class StashRows { kShard, kAll, kGathered };
// Its columns on this tensor-parallel rank; kAttention: the backend's own layout;
// kQkHeads: the query and key heads (none without --qk-layernorm).
enum class StashColumns { kHidden, kQkv, kContext, kFc1, kFfn, kAttention, kQkHeads };

struct StashTensor {
  Tensor LayerStash::*tensor;
  StashRows rows;
  StashColumns columns;
  // The selective recomputation that drops it after forward (null: none does).
  bool SelectiveRecompute::*dropped_by;
  // Whether BackwardInput leaves it for BackwardWeight.
  bool kept_for_weight;
};

// What forward stashes, besides the norms' fp32 statistics.
inline constexpr StashTensor kForwardStash[] = {
    {&LayerStash::x, StashRows::kShard, StashColumns::kHidden, nullptr, true},
    {&LayerStash::ln1_out, StashRows::kShard, StashColumns::kHidden, &SelectiveRecompute::layernorm,
     false},
    {&LayerStash::ln1_full, StashRows::kGathered, StashColumns::kHidden,
     &SelectiveRecompute::layernorm, true},
    {&LayerStash::qkv, StashRows::kAll, StashColumns::kQkv, nullptr, false},
    {&LayerStash::attention, StashRows::kAll, StashColumns::kAttention,
     &SelectiveRecompute::core_attn, false},
    {&LayerStash::ctx, StashRows::kAll, StashColumns::kContext, nullptr, true},
    {&LayerStash::x1, StashRows::kShard, StashColumns::kHidden, nullptr, true},
    {&LayerStash::ln2_out, StashRows::kShard, StashColumns::kHidden, &SelectiveRecompute::layernorm,
     false},
    {&LayerStash::ln2_full, StashRows::kGathered, StashColumns::kHidden,
     &SelectiveRecompute::layernorm, true},
    {&LayerStash::fc1_out, StashRows::kAll, StashColumns::kFc1, &SelectiveRecompute::mlp, false},
    {&LayerStash::act, StashRows::kAll, StashColumns::kFfn, &SelectiveRecompute::mlp, true},
    {&LayerStash::qk_in, StashRows::kAll, StashColumns::kQkHeads, nullptr, true},
};

// The gradients BackwardInput stashes for BackwardWeight.
inline constexpr StashTensor kWeightGradientStash[] = {
    {&LayerStash::d_ln1, StashRows::kShard, StashColumns::kHidden, nullptr, true},
    {&LayerStash::d_qkv, StashRows::kAll, StashColumns::kQkv, nullptr, true},
    {&LayerStash::d_proj_full, StashRows::kAll, StashColumns::kHidden, nullptr, true},
    {&LayerStash::d_ln2, StashRows::kShard, StashColumns::kHidden, nullptr, true},
    {&LayerStash::d_fc1, StashRows::kAll, StashColumns::kFc1, nullptr, true},
    {&LayerStash::d_fc2_full, StashRows::kAll, StashColumns::kHidden, nullptr, true},
    {&LayerStash::d_qk, StashRows::kAll, StashColumns::kQkHeads, nullptr, true},
};

// Whether forward under `selective` drops `t`.
inline bool DroppedAfterForward(const StashTensor& t, const SelectiveRecompute& selective) {
  return t.dropped_by != nullptr && selective.*t.dropped_by;
}

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_LAYER_STASH_H_
