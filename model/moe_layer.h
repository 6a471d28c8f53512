// A mixture-of-experts layer in place of a transformer layer's dense MLP (Megatron's
// MoELayer on one rank): the router picks each token's top-k experts and weights, the
// tokens are permuted into expert order (dropping what exceeds an expert's capacity, and
// padding up to it with --moe-pad-expert-input-to-capacity), each expert's MLP runs on
// its rows, and the outputs are combined back per token, weighted:
//   y[t] = sum_j p[t, j] * expert_{e(t, j)}(x[t])  (+ shared_expert(x[t]))
// where --moe-shared-expert-gate scales the shared expert's output by sigmoid(x[t] g) (g
// [1, hidden]: Megatron's shared expert gate, Qwen2-MoE's shared_expert_gate).
// Parameters: `layers.N.mlp.router.weight`, `layers.N.mlp.experts.E.fc{1,2}.weight`,
// `layers.N.mlp.shared_experts.fc{1,2}.weight` (and `.gate.weight`). Under tensor
// parallelism every rank routes every token of the micro-batch; the experts are split like
// the dense MLP (over --expert-tensor-parallel-size ranks, whose copies in a TP group share
// the rows), so the output and the input gradient are this rank's partial sums (the
// caller's TP region sums them, as for the dense MLP). Under expert parallelism (the TensorParallel's
// expert groups) the rank holds E/EP of the experts and its rows travel to them and back
// (model/routed_experts.h); routing, capacity and the combine stay per rank.
#ifndef CONVEYOR_MODEL_MOE_LAYER_H_
#define CONVEYOR_MODEL_MOE_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/expert_mlp.h"
#include "model/linear.h"
#include "model/micro_batch.h"
#include "model/model_shape.h"
#include "model/moe_dispatch.h"
#include "model/moe_router.h"
#include "model/parameter.h"
#include "model/routed_experts.h"
#include "runtime/ops.h"

namespace conveyor {

// What the layer keeps for one micro-batch between forward and W.
struct MoeStash {
  Tensor x;  // the layer's input [tokens, hidden], from BackwardInput on (for W)
  RouterStash router;
  DispatchPlan plan;
  Tensor expert_out;  // [rows, hidden]: each expert's output rows (until BackwardInput)
  RoutedExpertsStash experts;
  ExpertStash shared;
  // --moe-shared-expert-gate: each token's sigmoid(x g) (host), the shared expert's output
  // before the gate (until BackwardInput) and the gate logits' gradient (for W).
  std::vector<float> shared_gate;
  Tensor shared_out;
  Tensor d_shared_gate;
};

// The weights' element counts of an MoE layer on a rank of `tp` tensor-parallel, `ep`
// expert-parallel and `etp` expert-tensor-parallel ranks (0: TP), in the order it creates
// them: the router, each of its E/EP experts' fc1 and fc2 (elements [1, 1 + 2E/EP)), the
// shared expert's (split over TP like the dense MLP), its gate's (replicated, like the
// router; for the memory model).
std::vector<int64_t> MoeWeightElements(const ModelShape& s, int tp, int ep = 1, int etp = 0);
// One routed expert's weights (fc1 and fc2) split over `tp` ranks.
int64_t ExpertWeightElements(const ModelShape& s, int tp);
// The parameters of one MoE layer (on a rank of `tp`) that a token does not compute with:
// every expert's but its top-k's. A model's active parameters (Megatron's) are its total
// less these over its MoE layers.
int64_t InactiveExpertParameters(const ModelShape& s, int tp);

// What a layer's training micro-batches routed since the last TakeMetrics.
struct MoeLayerMetrics {
  int64_t micro_batches = 0;
  RouterLosses losses;                     // summed over the micro-batches
  std::vector<int64_t> tokens_per_expert;  // dispatched (kept) tokens, summed
  int64_t dropped = 0;                     // routing slots dropped over capacity, summed
};

class MoeLayer {
 public:
  // `name` is the layer's MLP prefix ("layers.N.mlp"); `ops` must outlive the layer.
  MoeLayer(const Ops* ops, ParameterStore* store, const std::string& name, const ModelShape& shape,
           const TensorParallel& tp);

  // x [tokens, hidden] (the micro-batch's tokens) -> y [tokens, hidden].
  // Every rank of the expert-parallel group must call (it exchanges rows).
  absl::StatusOr<Tensor> Forward(const Tensor& x, const MicroBatchContext& mb,
                                 MoeStash* stash) const;
  // dy [tokens, hidden] -> dx [tokens, hidden], the auxiliary losses' gradients included
  // at `aux_loss_scale` (the weight of this micro-batch's loss in the step's gradient).
  // `x` is forward's input again: the layer does not hold it between F and B, so that
  // selective recomputation can drop it (the transformer layer rebuilds it).
  absl::StatusOr<Tensor> BackwardInput(const Tensor& x, const Tensor& dy, float aux_loss_scale,
                                       MoeStash* stash) const;
  // Accumulates the weight gradients and the micro-batch's routing metrics (W runs once
  // per training micro-batch, however often forward is recomputed) and empties the stash.
  void BackwardWeight(MoeStash* stash);
  // The metrics since the last call, which starts them anew.
  MoeLayerMetrics TakeMetrics();

  void AppendParameters(std::vector<Parameter*>* out) const;
  // The router's expert bias (--moe-router-enable-expert-bias), else null.
  ExpertBias* expert_bias() { return router_.expert_bias(); }

 private:
  const Ops* ops_;
  ModelShape shape_;
  MoeRouter router_;
  RoutedExperts experts_;
  // The gate of the shared expert's output (x -> sigmoid(x g) * out); its backward gives
  // the gradient of the ungated output and adds the gate's input gradient into dx.
  Tensor GateSharedOutput(const Tensor& x, const Tensor& out, MoeStash* stash) const;
  Tensor GateSharedBackward(const Tensor& dy, MoeStash* stash, Tensor* dx) const;

  std::unique_ptr<ExpertMlp> shared_;  // null without --moe-shared-expert-intermediate-size
  std::unique_ptr<Linear> shared_gate_;  // null without --moe-shared-expert-gate
  MoeLayerMetrics metrics_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_LAYER_H_
