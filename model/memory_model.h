// The memory a rank holds, predicted from the configuration alone (docs/design.md §11:
// Korthikanti et al., 2022's accounting made exact for this implementation), to compare
// with what the allocator's categories measure:
//  - model state: fp32 weights and gradients (4 + 4 bytes per parameter held), with
//    --bf16 a bf16 copy of every GEMM weight (2 bytes), the optimizer's state (Adam 8,
//    SGD 4; sharded 1/DP by the distributed optimizer, which also keeps a flat gradient
//    buffer and an fp32 master copy of its shard), and the replicated optimizer's DP
//    gradient buckets;
//  - activations: the bytes one micro-batch leaves stashed per model chunk between its
//    F and its B (what recomputation drops is not counted; under zero-bubble schedules,
//    the larger of that and what waits between B and W), summed over the stashes the
//    schedule holds at once at its peak, plus one layer's working set during backward
//    and what its backward rebuilds (the whole layer under full recomputation, the
//    dropped parts under selective). Activations take 2 bytes under --bf16, 4 otherwise;
//    norm statistics 4. Attention keeps fp32 probabilities [b, h, s, s] on the CPU and
//    each row's fp32 log-sum-exp [b, h, s] on the CUDA backend (fused attention).
// On the CPU's emulated bf16 the prediction leaves out the fp32 copies an op makes of
// its operands while it runs (runtime/bf16_emulation_ops.h).
#ifndef CONVEYOR_MODEL_MEMORY_MODEL_H_
#define CONVEYOR_MODEL_MEMORY_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_shape.h"
#include "model/recompute.h"
#include "parallel/pipeline/timeline.h"
#include "proto/config.pb.h"

namespace conveyor {

struct ActivationShape {
  int64_t micro_batch = 1;
  int64_t seq = 1;
  int tp = 1;
  bool sequence_parallel = false;
  int64_t bytes = 4;             // per activation element: 4 fp32, 2 bf16
  bool fused_attention = false;  // keeps row log-sum-exps instead of probabilities
};

// Bytes one micro-batch leaves in a layer's stash after its forward.
int64_t LayerStashBytes(const ModelShape& s, const ActivationShape& a,
                        const SelectiveRecompute& selective, bool full_recompute,
                        bool keeps_checkpoint);
// Bytes a layer keeps between a micro-batch's B and its W (zero-bubble schedules run W
// later): the gradients W needs and the activations they multiply.
int64_t LayerAwaitingWeightBytes(const ModelShape& s, const ActivationShape& a);
// Bytes the head (final norm, logits) stashes per micro-batch.
int64_t HeadStashBytes(const ModelShape& s, const ActivationShape& a);
// Peak bytes of one layer's backward beyond the stashes (gradient temporaries).
int64_t LayerBackwardWorkingBytes(const ModelShape& s, const ActivationShape& a);

struct RankMemory {
  int pipeline_rank = 0;
  int64_t parameters = 0;  // elements this rank holds
  int64_t weight_bytes = 0;
  int64_t grad_bytes = 0;  // gradients and gradient buffers
  int64_t optimizer_bytes = 0;
  int64_t stash_bytes_per_micro_batch = 0;  // summed over the rank's chunks
  int peak_stashed = 0;                     // (micro-batch, chunk) pairs, from the schedule
  int64_t activation_peak_bytes = 0;
  int64_t total_bytes() const {
    return weight_bytes + grad_bytes + optimizer_bytes + activation_peak_bytes;
  }
};

// One entry per pipeline rank (tensor- and data-parallel rank 0; the others match up
// to rounding). `timeline` is the simulated run of the configured schedule (each
// rank's actions in order), from which the stashes held at once follow.
// `data_parallel_size` is the job's DP (ResolvedConfig::dp(); under an external
// launcher the world size comes from its environment, not from the flags).
absl::StatusOr<std::vector<RankMemory>> PredictMemory(const Config& config, const ModelShape& shape,
                                                      const pipeline::Timeline& timeline,
                                                      int data_parallel_size);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MEMORY_MODEL_H_
