// A mixture-of-experts model's MoE settings as plain numbers (part of ModelShape),
// resolved from Megatron's --num-experts / --moe-* flags.
#ifndef CONVEYOR_MODEL_MOE_SHAPE_H_
#define CONVEYOR_MODEL_MOE_SHAPE_H_

#include <cstdint>
#include <vector>

#include "model/moe_routing.h"

namespace conveyor {

struct MoeShape {
  RouterSpec router;         // router.experts == 0: a dense model
  int64_t ffn_hidden = 0;    // each expert's MLP width (--moe-ffn-hidden-size)
  std::vector<bool> layers;  // per layer: MoE (true) or dense
  // The load-balancing losses (--moe-router-load-balancing-type, with one
  // --moe-aux-loss-coeff per type as Megatron's get_aux_loss_coeff reads them): each
  // type's coefficient, 0 where it is off. model/moe_router.h computes them.
  float aux_loss_coeff = 0.0f;         // aux_loss: over each micro-batch
  float seq_aux_loss_coeff = 0.0f;     // seq_aux_loss: over each sequence, averaged
  float global_aux_loss_coeff = 0.0f;  // global_aux_loss: counts over the global batch
  float z_loss_coeff = 0.0f;
  // --moe-router-dtype fp32: the router's GEMM (and its gradients) in fp32 whatever the
  // compute type (Megatron's router_gating_linear); the routing math is fp32 or wider on
  // every backend anyway (model/moe_routing.h).
  bool router_fp32 = false;
  int64_t shared_expert_ffn = 0;  // 0: no shared expert
  bool shared_expert_gate = false;  // its output scaled by sigmoid(x g) per token
  float capacity_factor = 0.0f;   // <= 0: no capacity, no token dropped
  TokenDropPolicy drop_policy = TokenDropPolicy::kProbs;
  bool pad_to_capacity = false;
  // --moe-router-enable-expert-bias: a per-expert bias steers the top-k choice (see
  // model/expert_bias.h), moved by bias_update_rate after each step.
  bool expert_bias = false;
  float bias_update_rate = 0.0f;

  int64_t experts() const { return router.experts; }
  bool IsMoeLayer(int64_t layer) const {
    return router.experts > 0 && layer < static_cast<int64_t>(layers.size()) && layers[layer];
  }
  // How many of the first `num_layers` layers are MoE layers.
  int64_t CountMoeLayers(int64_t num_layers) const {
    int64_t count = 0;
    for (int64_t layer = 0; layer < num_layers; ++layer) count += IsMoeLayer(layer);
    return count;
  }
  bool drops_tokens() const { return capacity_factor > 0.0f; }
};

// Rows each expert gets for a micro-batch of `tokens` under
// --moe-pad-expert-input-to-capacity (Megatron pads to the capacity, or to every token
// when the capacity exceeds them), else 0.
int64_t PaddedExpertRows(const MoeShape& moe, int64_t tokens);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_SHAPE_H_
