// Training on one rank of a job: builds this rank's part of the model over its
// tensor-parallel group, places it among the data-parallel ranks, and runs the
// training loop. The log goes to `out` only on the rank Megatron logs from (the
// last pipeline stage's first tensor- and data-parallel rank).
#ifndef CONVEYOR_TRAINER_RANK_TRAINING_H_
#define CONVEYOR_TRAINER_RANK_TRAINING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"
#include "model/tensor_parallel.h"
#include "parallel/parallel_state.h"
#include "parallel/rank_environment.h"
#include "proto/config.pb.h"
#include "trainer/backend.h"
#include "trainer/config/resolved_config.h"
#include "trainer/rank_context.h"
#include "trainer/reporting/profiling_ops.h"
#include "trainer/training_loop.h"

namespace conveyor {

struct RankRun {
  // --profile on this rank: the backend's ops, recorded; the model computes through them.
  std::unique_ptr<profiler::ProfilingOps> profiling_ops;
  TrainingResult result;
  std::unique_ptr<TensorParallel> tp;  // the model refers to it
  std::unique_ptr<GptStage> stage;     // this rank's trained part of the model
};

// This rank's part of the model, for `resolved` and the rank's place, with its
// parameters on `backend`'s device.
absl::StatusOr<RankRun> BuildRankModel(const ResolvedConfig& resolved, const RankContext& context,
                                       const Backend& backend);

// `state` describes the same layout as the config. Builds the rank's context from
// them, once, for the model and the training loop.
absl::StatusOr<RankRun> TrainOnRank(const ResolvedConfig& resolved, ParallelState& state,
                                    const SampleSource& data, const TrainingOutputs& out,
                                    const EvaluationSplits& held_out = {},
                                    const Backend& backend = CpuBackend());

// One rank's whole run: the backend, the groups (over the launcher's environment `env`,
// null for a job of one process), then either --pipeline-rehearsal-ms's rehearsal or the
// data, model and training, with the logging rank's outputs on `out`; at the end the
// ranks meet once more and the run's rendezvous files go (ParallelState::Finish).
absl::Status RunRank(const ResolvedConfig& resolved, const RankEnvironment* env,
                     std::ostream& out);

// A rank's CPU threads: the ranks on a machine share the CPUs the process may use
// (affinity and cgroup quota, docs/design.md §9). `one_process`: a job of one process
// (no launcher), which takes them all.
int CpuThreadsPerRank(const Config& config, bool one_process);

// Whether `state`'s rank is the one that logs.
bool IsLoggingRank(const ParallelState& state);
// Whether it writes --tensorboard-dir: the last rank, as in Megatron (its figures are
// the logging rank's; its memory is its own).
bool IsTensorBoardRank(const ParallelState& state);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_RANK_TRAINING_H_
