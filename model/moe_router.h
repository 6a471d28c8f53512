// The router of a mixture-of-experts layer: logits = x W^T (W = `name`.weight, [experts,
// hidden], Megatron's router without bias; with --moe-router-dtype fp32 x and W are
// widened and the GEMM and its gradients are fp32 whatever the compute type, as
// Megatron's router_gating_linear, the input gradient rounded back to the compute type
// as x was), then the routing math of
// model/moe_routing.h on the host: each token's top-k experts and weights, the
// experts' capacity, and in training the auxiliary losses, whose gradients reach the
// logits in backward scaled like the main loss (Megatron's MoEAuxLossAutoScaler).
//
// Under tensor parallelism every rank routes all the micro-batch's tokens alike; the
// routing weights' gradients it gets are partial sums (the experts are TP-sharded), so
// its logits' gradient, and with it the router weight's and the input's, is one part of a
// sum over TP (the weight is marked like Megatron's sequence-parallel router weight; the
// auxiliary losses' gradients are split evenly over the ranks).
//
// Under context parallelism the rank holds some chunks of each sample, but the
// decisions over the micro-batch's tokens are one rank's: forward gathers the logits of
// the whole micro-batch over the context-parallel ranks (model/context_rows.h), routes
// them, drops over the capacity of all its tokens (in their sample order), computes the
// auxiliary losses over the whole micro-batch (per sequence for seq_aux_loss) and keeps
// the rank's rows of the routing and of the losses' gradient: summed over the ranks, as
// the gradients are, they are one rank's. Every context-parallel rank reports the whole
// micro-batch's losses.
//
// With --moe-router-enable-expert-bias the router holds the layer's ExpertBias: forward
// chooses with it, W (once per training micro-batch, however often forward is
// recomputed) counts the rank's tokens per expert into it (summed over DP x CP after
// the step).
#ifndef CONVEYOR_MODEL_MOE_ROUTER_H_
#define CONVEYOR_MODEL_MOE_ROUTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/expert_bias.h"
#include "model/micro_batch.h"
#include "model/moe_global_load.h"
#include "model/moe_routing.h"
#include "model/moe_shape.h"
#include "model/parameter.h"
#include "model/tensor_parallel.h"
#include "runtime/ops.h"

namespace conveyor {

// A device tensor's values as a host fp32 array, and back as a device tensor of
// `dtype` (the compute type of `ops` unless said): the routing math runs on host arrays.
std::vector<float> ToHostFloats(const Ops& ops, const Tensor& t);
Tensor FromHostFloats(const Ops& ops, const std::vector<float>& values, std::vector<int64_t> shape);
Tensor FromHostFloats(const Ops& ops, const std::vector<float>& values, std::vector<int64_t> shape,
                      DType dtype);

// A micro-batch's auxiliary losses without their coefficients, by the names Megatron
// logs them under; 0 where not computed.
struct RouterLosses {
  double load_balancing = 0.0;         // aux_loss
  double seq_load_balancing = 0.0;     // seq_aux_loss
  double global_load_balancing = 0.0;  // global_aux_loss, of the DP ranks' micro-batches
  double z = 0.0;                      // --moe-z-loss-coeff

  RouterLosses& operator+=(const RouterLosses& o) {
    load_balancing += o.load_balancing;
    seq_load_balancing += o.seq_load_balancing;
    global_load_balancing += o.global_load_balancing;
    z += o.z;
    return *this;
  }
};

// A micro-batch's routing; `tokens` are the rank's (its rows of x), except where said.
struct RouterStash {
  std::vector<float> logits;  // host fp32 [tokens, experts]
  TopKRouting routing;
  std::vector<uint8_t> keep;  // [tokens * topk]; empty: no capacity, every slot kept
  // Rows per expert under --moe-pad-expert-input-to-capacity (the capacity of the whole
  // micro-batch, at most the rank's tokens), else 0.
  int64_t pad_rows = 0;
  // In training: d(the auxiliary losses, each times its coefficient)/d(logits), host
  // [tokens, experts], before the main loss's scale; empty without auxiliary losses.
  std::vector<float> aux_grad;
  // The whole micro-batch's losses (global_aux_loss: the data-parallel ranks').
  RouterLosses losses;
  Tensor d_logits;  // BackwardInput's (of the gate's dtype), for W
};

class MoeRouter {
 public:
  MoeRouter(const Ops* ops, ParameterStore* store, const std::string& name, int64_t hidden,
            const MoeShape& moe, float init_std, const TensorParallel& tp);

  // Routes the rank's tokens x [tokens, hidden] of the micro-batch (in [batch, seq]
  // order; under context parallelism its chunks of each sample, and every rank of the
  // context-parallel group must call).
  absl::Status Forward(const Tensor& x, const MicroBatchContext& mb, RouterStash* stash) const;
  // From d(loss)/d(routing weights) (host [tokens * topk]; this rank's part under TP) and
  // the auxiliary losses' gradients times `aux_loss_scale`: dx += d(loss)/dx through the
  // router (this rank's part).
  void BackwardInput(absl::Span<const float> d_probs, float aux_loss_scale, RouterStash* stash,
                     Tensor* dx) const;
  // Also counts the micro-batch's tokens per expert into the expert bias.
  void BackwardWeight(const Tensor& x, RouterStash* stash);

  void AppendParameters(std::vector<Parameter*>* out) const { out->push_back(weight_); }
  // Null without --moe-router-enable-expert-bias.
  ExpertBias* expert_bias() { return bias_.get(); }

 private:
  // The routing of the whole micro-batch from its logits ([batch * seq, experts], in
  // sample order), as one rank decides it; no `logits` nor `d_logits`.
  absl::StatusOr<RouterStash> RouteMicroBatch(const std::vector<float>& logits,
                                              const MicroBatchContext& mb) const;
  // In training: the micro-batch's auxiliary losses into whole->losses, their gradients
  // times their coefficients into whole->aux_grad.
  absl::Status AddAuxiliaryLosses(const std::vector<float>& logits, const MicroBatchContext& mb,
                                  RouterStash* whole) const;
  // `t` in the gate's dtype (itself when it has it already).
  Tensor ForGate(const Tensor& t) const { return ops_->CastTo(t, gate_dtype_); }

  const Ops* ops_;
  MoeShape moe_;
  int tp_size_;
  Communicator* cp_;  // the context-parallel group, over which Forward gathers the logits
  DType gate_dtype_;                  // fp32 under --moe-router-dtype fp32, else compute
  Parameter* weight_;                 // [experts, hidden]
  std::unique_ptr<ExpertBias> bias_;  // `name`.expert_bias
  // global_aux_loss's counts over the step (null without it). The routing state of a
  // const Forward, as the decisions it records are.
  std::unique_ptr<MoeGlobalLoad> global_load_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_ROUTER_H_
