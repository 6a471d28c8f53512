// One pre-norm GPT transformer layer, as Megatron builds it:
//   x1  = x + dropout(proj(attention(rope(qk_norm(qkv(norm1(x)))))))
//   out = x1 + dropout(fc2(act(fc1(norm2(x1)))))
// (qk_norm: --qk-layernorm's per-head norm of the queries and keys, else nothing; under
// multi-latent attention, model/mla_attention.h, its projections build qkv instead)
// with forward, backward-input (B) and backward-weight (W) as separate calls, so that a
// pipeline schedule can run W later than B (zero-bubble). What backward needs lives in
// a LayerStash per micro-batch (model/layer_stash.h); dropout masks are regenerated, not
// stored.
//
// Tensor parallelism (Megatron's): qkv and fc1 are column-parallel (a rank holds whole
// query groups and a slice of the MLP), proj and fc2 row-parallel; see
// tensor_parallel.h for the communication at the region boundaries.
#ifndef CONVEYOR_MODEL_TRANSFORMER_LAYER_H_
#define CONVEYOR_MODEL_TRANSFORMER_LAYER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "model/layer_stash.h"
#include "model/linear.h"
#include "model/micro_batch.h"
#include "model/mla_attention.h"
#include "model/model_shape.h"
#include "model/moe_layer.h"
#include "model/norm_layer.h"
#include "model/parameter.h"
#include "model/recompute.h"
#include "model/tensor_parallel.h"
#include "runtime/op_params.h"
#include "runtime/ops.h"
#include "runtime/philox.h"

namespace conveyor {

class TransformerLayer {
 public:
  // `rope` may be null (learned positions); it, `ops` and `tp` must outlive the layer.
  // `selective` names what forward drops and BackwardInput recomputes.
  TransformerLayer(const Ops* ops, ParameterStore* store, const ModelShape& shape,
                   int64_t layer_index, const RopeTable* rope, uint64_t seed,
                   const TensorParallel* tp, SelectiveRecompute selective = {});

  absl::StatusOr<Tensor> Forward(const Tensor& x, const MicroBatchContext& mb,
                                 LayerStash* stash) const;
  absl::StatusOr<Tensor> BackwardInput(const Tensor& dy, const MicroBatchContext& mb,
                                       LayerStash* stash) const;
  // Accumulates weight gradients and empties the stash.
  void BackwardWeight(LayerStash* stash);

  // The layer's parameters (this rank's shards).
  std::vector<Parameter*> Parameters() const;

  // The weight of the micro-batches' losses in the step's gradient (1 / (M * DP)), at
  // which a mixture-of-experts layer's auxiliary losses enter the gradient (Megatron's
  // MoEAuxLossAutoScaler); 1 until set.
  void SetAuxLossScale(float scale) { aux_loss_scale_ = scale; }
  // The mixture of experts in place of the dense MLP, or null.
  MoeLayer* moe() { return moe_.get(); }
  int64_t layer_index() const { return layer_index_; }

 private:
  enum class DropoutSite { kAttentionOut, kMlpOut, kAttentionProbs };
  CounterRng DropoutRng(DropoutSite site, int64_t iteration) const;
  // Hidden dropout on the rows this rank holds outside the TP region (under sequence
  // parallelism, its shard), each masked by its row in the micro-batch; and the
  // bias-dropout-add of `linear`'s output, the same way.
  void HiddenDropout(const MicroBatchContext& mb, DropoutSite site, const Tensor& in,
                     Tensor* out) const;
  // (`linear` null: no bias, the mixture of experts' output.)
  void BiasDropoutAdd(const Linear* linear, const MicroBatchContext& mb, DropoutSite site,
                      const Tensor& residual, Tensor* y) const;
  // qkv from ln1_full, through the fused projection or multi-latent attention's; and
  // d_ln1's partial sum (this rank's heads) from d_qkv.
  Tensor QkvForward(LayerStash* stash) const;
  Tensor QkvBackwardInput(LayerStash* stash) const;
  void ApplyRopeToQueriesAndKeys(const MicroBatchContext& mb, bool inverse, Tensor* qkv) const;
  // --qk-layernorm: normalises each query and key head of qkv in place, stashing the
  // heads' inputs; backward maps d_qkv's query and key columns back through the norms.
  void NormQueriesAndKeys(Tensor* qkv, LayerStash* stash) const;
  void NormQueriesAndKeysBackward(Tensor* d_qkv, LayerStash* stash) const;
  AttentionShape AttentionShapeOf(const MicroBatchContext& mb) const;
  // `rng` draws the probabilities' dropout mask; it must outlive the result.
  AttentionDropout AttentionDropoutOf(const MicroBatchContext& mb, const CounterRng* rng) const;
  float AttentionScale() const;  // 1 / sqrt(head_dim), or MlaSoftmaxScale
  int64_t Window() const;        // this layer's sliding window (AttentionMask::window)
  // The pieces forward computes and selective recomputation repeats.
  absl::Status NormsOut(const NormLayer& norm, const Tensor& in, Tensor* out, Tensor* full,
                        NormStats* stats) const;
  absl::Status AttentionCore(const MicroBatchContext& mb, const Tensor& qkv, Tensor* attention,
                             Tensor* ctx) const;
  absl::Status AttentionCoreBackward(const MicroBatchContext& mb, const Tensor& d_ctx,
                                     LayerStash* stash) const;
  void MlpIn(const Tensor& ln2_full, Tensor* fc1_out, Tensor* act) const;
  // The MLP block, dense or a mixture of experts: its output before the bias-dropout-add,
  // and its input gradient d_ln2 (stashed) from the gradient after the dropout.
  absl::StatusOr<Tensor> MlpForward(const MicroBatchContext& mb, LayerStash* stash) const;
  absl::Status MlpBackwardInput(const Tensor& d_out, LayerStash* stash) const;
  void MlpBackwardWeight(LayerStash* stash);
  // Rebuilds what forward dropped under selective recomputation.
  absl::Status RecomputeDropped(const MicroBatchContext& mb, LayerStash* stash) const;

  const Ops* ops_;
  ModelShape shape_;
  int64_t layer_index_;
  const RopeTable* rope_;
  uint64_t seed_;
  const TensorParallel* tp_;
  SelectiveRecompute selective_;
  int64_t local_groups_;  // query groups (and their heads) this rank holds
  int64_t local_ffn_;
  NormLayer ln1_;
  std::optional<Linear> qkv_;          // the fused projection,
  std::unique_ptr<MlaAttention> mla_;  // or multi-latent attention's (--multi-latent-attention)
  std::optional<NormLayer> q_norm_, k_norm_;  // --qk-layernorm only
  Linear proj_;
  NormLayer ln2_;
  std::optional<Linear> fc1_, fc2_;  // the dense MLP
  std::unique_ptr<MoeLayer> moe_;     // or a mixture of experts (--num-experts)
  float aux_loss_scale_ = 1.0f;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_TRANSFORMER_LAYER_H_
