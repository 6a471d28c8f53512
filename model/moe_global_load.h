// Megatron's --moe-router-load-balancing-type global_aux_loss (router.py's
// _apply_global_aux_loss): the load-balancing loss whose expert counts are those of the
// global batch rather than of one micro-batch. As Megatron has them before a step's
// gradients are final, they are the counts of the data-parallel ranks' micro-batches of
// the same place in the step (summed over the data-parallel group: Megatron's
// tp_dp_cp group, whose tensor- and context-parallel ranks here route whole micro-batches
// alike), averaged over the step's micro-batches up to this one (Megatron's
// global_tokens_per_expert / ga_steps, reset after each step). With T the tokens of one
// micro-batch and D the data-parallel ranks, rank r's loss is
//   L_r = E / (k (D T)^2) * sum_e mean_c_e * P_e(r)
// (P_e(r): its micro-batch's summed scores, model/moe_routing.h's ExpertLoad), so
// that the ranks' losses add up to the loss of their micro-batches together, which is
// what Megatron logs as global_load_balancing_loss.
//
// A router calls it once per forward of a training micro-batch, on every rank of the
// data-parallel group in the same order (the ranks run one schedule); a recomputed
// forward finds its micro-batch's sums again and crosses no rank.
#ifndef CONVEYOR_MODEL_MOE_GLOBAL_LOAD_H_
#define CONVEYOR_MODEL_MOE_GLOBAL_LOAD_H_

#include <cstdint>
#include <map>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/micro_batch.h"
#include "model/moe_routing.h"
#include "parallel/communicator.h"

namespace conveyor {

class MoeGlobalLoad {
 public:
  // `dp` is the data-parallel group; it must outlive this object.
  explicit MoeGlobalLoad(Communicator* dp) : dp_(dp) {}

  // The micro-batch's rank loss L_r from its `logits` ([batch * seq, experts], the whole
  // micro-batch in sample order), adding `coeff` * dL_r/dlogits into d_logits; returns
  // the loss of the data-parallel ranks' micro-batches together (the sum of their L_r).
  absl::StatusOr<double> Loss(const RouterSpec& spec, const MicroBatchContext& mb,
                              absl::Span<const float> logits, float coeff,
                              absl::Span<float> d_logits);

 private:
  Communicator* dp_;
  int64_t iteration_ = -1;
  // This step's micro-batches by their first sample: their ExpertLoad summed over the
  // data-parallel group.
  std::map<int64_t, ExpertLoad> summed_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_GLOBAL_LOAD_H_
