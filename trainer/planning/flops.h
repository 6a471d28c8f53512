// Floating-point operations of one training iteration by Megatron-LM's formula
// (training.py, num_floating_point_operations), so TFLOP/s figures compare with
// Megatron's log. Forward + backward = 3 passes of 2 FLOPs per multiply-add:
//   12 * B * s * L * h^2 * ( (1 + g/a + s/h) * (a * d / h)      attention
//                          + (f / h) * (swiglu ? 3/2 : 1)          MLP
//                          + V / (2 * L * h) )                     logits
// with B samples, s tokens per sample, L layers, h hidden, a heads, g query groups,
// d head dim, f MLP hidden, V padded vocabulary. Like Megatron, it counts the full
// (not causal-halved) attention score matrix and ignores recomputation. In a mixture of
// experts only the active experts count, as in Megatron: an MoE layer's f is
// topk * moe_ffn + shared_ffn (the router's GEMM is not counted), so f / h above is the
// mean over the layers. Multi-latent attention's term is Megatron's MLA branch (flops.cc).
#ifndef CONVEYOR_TRAINER_PLANNING_FLOPS_H_
#define CONVEYOR_TRAINER_PLANNING_FLOPS_H_

#include <cstdint>

#include "model/model_shape.h"

namespace conveyor {

double MegatronFlopsPerIteration(const ModelShape& shape, int64_t global_batch_size);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_FLOPS_H_
