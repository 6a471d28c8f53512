// One pre-norm GPT transformer layer, as Megatron builds it:
//   x1  = x + dropout(proj(attention(rope(qkv(norm1(x))))))
//   out = x1 + dropout(fc2(act(fc1(norm2(x1)))))
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

#include "absl/status/statusor.h"
#include "model/layer_stash.h"
#include "model/linear.h"
#include "model/micro_batch.h"
#include "model/model_shape.h"
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

 private:
  enum class DropoutSite { kAttentionOut, kMlpOut, kAttentionProbs };
  CounterRng DropoutRng(DropoutSite site, int64_t iteration) const;
  // Global index of the first hidden element this rank holds outside the TP region.
  uint64_t HiddenDropoutIndex(const MicroBatchContext& mb, int64_t local_rows) const;
  void ApplyRopeToQueriesAndKeys(const MicroBatchContext& mb, bool inverse, Tensor* qkv) const;
  AttentionShape AttentionShapeOf(const MicroBatchContext& mb) const;
  // `rng` draws the probabilities' dropout mask; it must outlive the result.
  AttentionDropout AttentionDropoutOf(const MicroBatchContext& mb, const CounterRng* rng) const;
  float AttentionScale() const;  // 1 / sqrt(head_dim)
  // The pieces forward computes and selective recomputation repeats.
  absl::Status NormsOut(const NormLayer& norm, const Tensor& in, Tensor* out, Tensor* full,
                        NormStats* stats) const;
  void AttentionCore(const MicroBatchContext& mb, const Tensor& qkv, Tensor* attention,
                     Tensor* ctx) const;
  void MlpIn(const Tensor& ln2_full, Tensor* fc1_out, Tensor* act) const;
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
  Linear qkv_;
  Linear proj_;
  NormLayer ln2_;
  Linear fc1_;
  Linear fc2_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_TRANSFORMER_LAYER_H_
