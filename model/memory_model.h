// The memory a rank holds, predicted from the configuration alone (docs/design.md §11:
// Korthikanti et al., 2022's accounting made exact for this implementation), to compare
// with what the allocator's categories measure:
//  - model state, as the updaters lay it out: without the distributed optimizer, fp32
//    weights, gradients (one bucketed buffer, each gradient a view into it) and the
//    optimizer's state (Adam 8 bytes, SGD 4), plus under --bf16 a bf16 copy of every
//    GEMM weight and the embedding table: Megatron's 18 bytes per parameter with Adam
//    under bf16, 16 in fp32. With it (trainer/optimization/distributed_optimizer.cc) values and
//    gradients live in buckets padded to a multiple of DP, the state and (bf16) the
//    fp32 master values sharded 1/DP: 6 + 12/DP under bf16 for the parameters read in
//    bf16, 8 + 8/DP for the few read in fp32 (norms, biases, learned positions), and
//    8 + 8/DP in fp32;
//  - activations: the bytes one micro-batch leaves stashed per model chunk between its
//    F and its B (what recomputation drops is not counted; under zero-bubble schedules,
//    the larger of that and what waits between B and W), summed over the stashes the
//    schedule holds at once at its peak, plus one layer's working set during backward
//    and what its backward rebuilds (the whole layer under full recomputation, the
//    dropped parts under selective). Activations take 2 bytes under --bf16, 4 otherwise;
//    norm statistics 4. Attention keeps each row's fp32 log-sum-exp [b, h, s] (both
//    backends compute it flash-attention style). Under context parallelism a rank holds
//    seq / CP tokens of each sample, and one layer's backward also holds ring attention's
//    key/value blocks in flight (two, and two fp32 gradient accumulators).
// On the CPU's emulated bf16 the prediction leaves out the fp32 copies an op makes of
// its operands while it runs (runtime/bf16_emulation_ops.h).
#ifndef CONVEYOR_MODEL_MEMORY_MODEL_H_
#define CONVEYOR_MODEL_MEMORY_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_shape.h"
#include "model/recompute.h"
#include "parallel/pipeline/timeline.h"
#include "parallel/rank_layout.h"

namespace conveyor {

// What a rank's memory depends on besides the model's shape: the layout, the schedule,
// the precision and how the updaters lay out the model state. From a resolved config:
// MemoryInputsOf (trainer/config/resolved_config.h).
struct MemoryInputs {
  // The job's sizes; dp is the job's DP (under an external launcher the world size comes
  // from its environment, not from the flags).
  ParallelSizes layout;
  int virtual_stages = 1;  // V, chunks per pipeline rank
  bool sequence_parallel = false;
  std::vector<int64_t> layers_per_stage;  // per global stage, P x V of them
  std::string pipeline_schedule = "1f1b";
  int64_t micro_batch_size = 1;
  int num_micro_batches = 1;  // M
  bool bf16 = false;
  bool adam = true;  // AdamW's two moments per parameter, else SGD's momentum
  bool distributed_optimizer = false;
  bool grad_reduce_in_bf16 = false;
  int64_t ddp_bucket_size = 0;  // elements
  RecomputePolicy recompute;
};

struct ActivationShape {
  int64_t micro_batch = 1;
  int64_t seq = 1;  // tokens per sample on this rank: --seq-length / CP
  int tp = 1;
  bool sequence_parallel = false;
  int64_t bytes = 4;  // per activation element: 4 fp32, 2 bf16
  int cp = 1;         // context-parallel ranks (ring attention's buffers)
  // A mixture of experts' expert-parallel and expert-tensor-parallel ranks: how many of
  // the routed rows a rank's experts run, and whether they are a copy of their own.
  int ep = 1;
  int etp = 1;
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
// What the multi-token prediction depths (model/mtp_block.h) keep for one micro-batch on
// the last stage, all D of them (0 without MTP).
int64_t MtpStashBytes(const ModelShape& s, const ActivationShape& a,
                      const SelectiveRecompute& selective);
// Peak bytes of one layer's backward beyond the stashes (gradient temporaries).
int64_t LayerBackwardWorkingBytes(const ModelShape& s, const ActivationShape& a);

struct RankMemory {
  int pipeline_rank = 0;
  int64_t parameters = 0;  // elements this rank holds
  int64_t weight_bytes = 0;
  int64_t grad_bytes = 0;  // gradients and gradient buffers
  int64_t optimizer_bytes = 0;
  int64_t bucket_padding = 0;  // elements the distributed optimizer's buckets add
  int64_t stash_bytes_per_micro_batch = 0;  // summed over the rank's chunks
  int peak_stashed = 0;                     // (micro-batch, chunk) pairs, from the schedule
  int64_t activation_peak_bytes = 0;
  // For the traffic: whether the rank holds the first stage (the embedding) and the last
  // (the output layer), and the gradient elements it sums over TP after the backward
  // (norms, the position table and a router under SP; --qk-layernorm's norms).
  bool first_stage = false;
  bool last_stage = false;
  int64_t tp_summed_elements = 0;
  int64_t total_bytes() const {
    return weight_bytes + grad_bytes + optimizer_bytes + activation_peak_bytes;
  }
};

// One entry per pipeline rank (tensor- and data-parallel rank 0; the others match up
// to rounding). `timeline` is the simulated run of `inputs`' schedule (each rank's
// actions in order), from which the stashes held at once follow. `data_parallel_rank`
// is the DP rank predicted (its slices of the distributed optimizer's buckets hold a
// different share of the padding).
absl::StatusOr<std::vector<RankMemory>> PredictMemory(const MemoryInputs& inputs,
                                                      const ModelShape& shape,
                                                      const pipeline::Timeline& timeline,
                                                      int data_parallel_rank = 0);

// `memory`, predicted from a timeline of `simulated_micro_batches` (fewer than `inputs`'
// M when a plan simulates a prefix, pipeline::SimulatedMicroBatches), made the
// prediction for M: where a rank's closed-form peak (pipeline::PeakStashed) grows
// between the two, GPipe's one chunk per rank, each more micro-batch holds its stash.
absl::Status ExtendToMicroBatches(const MemoryInputs& inputs, int simulated_micro_batches,
                                  std::vector<RankMemory>* memory);

// Megatron's model-state bytes per parameter for the same settings (its theoretical
// memory: 18 with Adam under bf16, 6 + 12/DP with the distributed optimizer), in general
// weight + fp32 gradient + (fp32 master under bf16 + optimizer state) / (DP if sharded).
double MegatronBytesPerParameter(const MemoryInputs& inputs);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MEMORY_MODEL_H_
