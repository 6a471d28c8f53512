// The largest sizes Conveyor accepts, checked before anything is built for them
// (docs/design.md §5). Tensor sizes are checked against the memory a rank may use
// (trainer/planning/host_memory_fit.h), but that check needs the model's structures first: one
// object per layer, per expert, per entry of --moe-layer-freq, per scheduled action.
// A count of those the machine cannot hold (--num-layers 100000000) ended in
// std::bad_alloc before it. These limits sit far above any real model (the largest
// published ones have about 100 layers and 256 experts) and keep every product the
// memory model and the plan form within int64.
#ifndef CONVEYOR_TRAINER_CONFIG_SIZE_LIMITS_H_
#define CONVEYOR_TRAINER_CONFIG_SIZE_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace conveyor {

// A limit: the largest value and what the program builds per unit.
struct SizeLimit {
  int64_t max;
  const char* why;
};

inline constexpr SizeLimit kMaxLayers{16384, "each layer is built as its own objects"};
inline constexpr SizeLimit kMaxExperts{16384, "each expert is built as its own objects"};
// Experts over all layers (--num-layers x --num-experts): the objects of the largest
// published mixtures, about 60 layers x 256 experts, fit 60 times.
inline constexpr SizeLimit kMaxLayerExperts{int64_t{1} << 20,
                                            "each layer's experts are built as objects"};
inline constexpr SizeLimit kMaxHidden{int64_t{1} << 20, "tensor sizes must stay within int64"};
inline constexpr SizeLimit kMaxFfnHidden{int64_t{1} << 22, "tensor sizes must stay within int64"};
inline constexpr SizeLimit kMaxHeads{int64_t{1} << 16, "tensor sizes must stay within int64"};
inline constexpr SizeLimit kMaxSequence{int64_t{1} << 24, "tensor sizes must stay within int64"};
inline constexpr SizeLimit kMaxVocabulary{int64_t{1} << 24, "tensor sizes must stay within int64"};
// Tokens of one micro-batch (--micro-batch-size x --seq-length): every activation is a
// multiple of it.
inline constexpr SizeLimit kMaxMicroBatchTokens{int64_t{1} << 32,
                                                "activation sizes must stay within int64"};
// Parameters of the whole model (weights, estimated before the model exists): 280
// trillion, a hundred times the largest published model; x 20 bytes stays in int64.
inline constexpr SizeLimit kMaxParameters{int64_t{1} << 48,
                                          "byte counts of the model state must stay within "
                                          "int64"};
// Compute actions of one training step over all pipeline ranks (PP x V x M: each
// micro-batch's forward and backward of each stage), which the executor lists before
// the step. --dry-run has no such limit: its plan simulates a prefix of the schedule.
inline constexpr SizeLimit kMaxStepActions{int64_t{1} << 22,
                                           "the schedule of a step lists every micro-batch's "
                                           "forward and backward of every stage"};
// --rampup-batch-size's increments, (GLOBAL - START) / INCREMENT: the ramp is planned
// and checked once per batch size (GPT-3's has 95).
inline constexpr SizeLimit kMaxRampIncrements{int64_t{1} << 20,
                                              "the ramp is planned once per batch size"};
// Samples and sample counts are also doubles (the learning-rate schedule, the ramp).
inline constexpr SizeLimit kMaxSamples{int64_t{1} << 53, "sample counts are exact in double"};
inline constexpr SizeLimit kMaxRanksPerNode{4096, "each local rank is a forked process"};

// "<source> <value> is more than <max>, the largest Conveyor accepts (<why>)<fix>", or
// nothing when `value` is within `limit`. `source` names where the value comes from
// (a flag, or a file and its key: trainer/hf reads config.json's sizes through it).
std::optional<std::string> SizeLimitProblem(absl::string_view source, int64_t value,
                                            const SizeLimit& limit, absl::string_view fix = "");

// The model's parameters, estimated in double from the flags alone (embedding, per
// layer attention and MLP or experts, and output layer) for kMaxParameters.
double EstimatedParameters(const ModelConfig& m);

// Every size of `config` beyond its limit, one line each naming the flag(s) and the fix.
// `data_parallel` is the run's DP (0 when the layout does not give one yet), for the
// micro-batches of a step. ValidateConfig checks these first, and alone when any fails:
// its other rules build per-layer and per-step structures.
std::vector<std::string> SizeLimitProblems(const Config& config, int64_t data_parallel);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_SIZE_LIMITS_H_
