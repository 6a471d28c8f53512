#include "trainer/rank_training.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "data/training_data.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/thread_pool.h"
#include "trainer/input_fingerprint.h"
#include "trainer/planning/rehearsal.h"
#include "trainer/reporting/line_file.h"
#include "trainer/reporting/step_profiler.h"
#include "trainer/reporting/tensorboard/megatron_scalars.h"
#include "trainer/training_data_turns.h"

namespace conveyor {

bool IsLoggingRank(const ParallelState& state) {
  return state.is_last_stage() && state.coords().tp == 0 && state.coords().dp == 0 &&
         state.coords().cp == 0;
}

bool IsTensorBoardRank(const ParallelState& state) {
  return state.rank() == state.world_size() - 1;
}

namespace {

// The groups the model communicates over, as ParallelState built them (the expert
// tensor-parallel group is the tensor-parallel group itself unless it differs).
ModelGroups ModelGroupsOf(const RankContext& context) {
  return {&context.tp(), &context.cp(), &context.ep(), &context.expert_tp(), &context.dp()};
}

}  // namespace

absl::StatusOr<RankRun> BuildRankModel(const ResolvedConfig& resolved, const RankContext& context,
                                       const Backend& backend) {
  RankRun run;
  run.tp = std::make_unique<TensorParallel>(ModelGroupsOf(context), context.sequence_parallel());
  run.stage = std::make_unique<GptStage>(
      backend.ops, resolved.model_shape(), resolved.config().training().seed(), run.tp.get(),
      context.pipeline(), resolved.layers_per_stage(), resolved.recompute_policy());
  return run;
}

absl::StatusOr<RankRun> TrainOnRank(const ResolvedConfig& resolved, ParallelState& state,
                                    const SampleSource& data, const TrainingOutputs& out,
                                    const EvaluationSplits& held_out, const Backend& backend) {
  const Config& config = resolved.config();
  ASSIGN_OR_RETURN(const RankContext context, RankContext::Create(state, resolved));
  Backend model_backend = backend;
  std::unique_ptr<profiler::ProfilingOps> profiling_ops;
  if (profiler::StepProfiler(config.logging(), context.world().rank()).enabled()) {
    profiling_ops = std::make_unique<profiler::ProfilingOps>(backend.ops);
    model_backend.ops = profiling_ops.get();
  }
  ASSIGN_OR_RETURN(RankRun run, BuildRankModel(resolved, context, model_backend));
  run.profiling_ops = std::move(profiling_ops);
  TrainingOutputs outputs = IsLoggingRank(state) ? out : TrainingOutputs{};
  outputs.tensorboard = out.tensorboard;  // made on IsTensorBoardRank only
  ASSIGN_OR_RETURN(run.result, Train(resolved, context, run.stage.get(), data, outputs, held_out,
                                     *backend.optimizer));
  return run;
}

int CpuThreadsPerRank(const Config& config, bool one_process) {
  const int local_ranks = one_process ? 1 : config.parallel().nproc_per_node();
  return std::max(1, cpu::UsableCpus() / local_ranks);
}

namespace {

// This rank's datasets: Megatron's split sizes (the training split sized by
// --train-samples when it is given, the same sample order as Megatron's for the same data
// and seed), built in turns by the ranks so that each view of --data-cache-path is
// written once.
absl::StatusOr<DataSplits> BuildRankData(const Config& config, Communicator& world,
                                         int local_rank) {
  const TrainingConfig& t = config.training();
  SplitSampleCounts counts =
      MegatronSampleCounts(t.train_iters(), t.global_batch_size(), config.data().eval_interval(),
                           config.data().eval_iters());
  if (t.train_samples() > 0) counts.train = t.train_samples();
  return BuildTrainingDataInTurns(config, counts, world, local_rank);
}

// The files the logging rank (metrics) and the TensorBoard rank write.
struct RankOutputFiles {
  std::unique_ptr<LineFile> metrics;
  std::unique_ptr<tensorboard::MegatronScalars> tensorboard;
};

absl::StatusOr<RankOutputFiles> OpenOutputFiles(const LoggingConfig& logging,
                                                const ParallelState& state) {
  RankOutputFiles files;
  if (!logging.metrics_file().empty() && IsLoggingRank(state)) {
    // Appended to: a resumed (or relaunched) run adds its records after the earlier
    // ones instead of wiping them.
    ASSIGN_OR_RETURN(files.metrics, LineFile::Open("--metrics-file", logging.metrics_file()));
  }
  if (!logging.tensorboard_dir().empty() && IsTensorBoardRank(state)) {
    ASSIGN_OR_RETURN(files.tensorboard, tensorboard::MegatronScalars::Start(logging));
  }
  return files;
}

absl::Status CloseOutputFiles(RankOutputFiles& files, int rank, std::ostream& out) {
  if (files.metrics != nullptr) RETURN_IF_ERROR(files.metrics->Close());
  if (files.tensorboard != nullptr) {
    ASSIGN_OR_RETURN(const std::string closed, files.tensorboard->Close(rank));
    out << closed << "\n";
  }
  return absl::OkStatus();
}

// The logging rank's last lines: what was trained (skipped steps, --nan-policy skip,
// changed nothing and are not counted as trained) and the device memory.
void PrintRunEnd(const TrainingResult& result, const Backend& backend, std::ostream& out) {
  const int64_t skipped = result.skipped_iterations;
  out << absl::StrFormat("conveyor: trained %d iterations",
                         static_cast<int64_t>(result.losses.size()) - skipped);
  if (skipped > 0) {
    out << absl::StrFormat(" (%d more skipped for a NaN or inf, --nan-policy skip)", skipped);
  }
  if (!result.losses.empty()) {
    out << absl::StrFormat(", final lm loss %.4f", result.losses.back());
  }
  out << "\n";
  const std::string memory = DeviceMemorySummary(backend);
  if (!memory.empty()) out << "conveyor: " << memory << "\n";
}

// The groups of this rank's job, over `backend`'s transport; the ranks agree on the
// config and inputs before building any group but the world.
absl::StatusOr<std::unique_ptr<ParallelState>> CreateParallelState(
    const ResolvedConfig& resolved, const RankEnvironment* env, const Backend& backend) {
  const Config& config = resolved.config();
  if (env == nullptr) return ParallelState::SingleProcess(backend.transport);
  return ParallelState::Create(
      *env, resolved.layout(), absl::Minutes(config.parallel().distributed_timeout_minutes()),
      backend.transport,
      [&config](Communicator& world) { return AgreeOnConfigAndInputs(config, world); });
}

// Data, outputs and training on a rank whose groups exist.
absl::Status TrainWithGroups(const ResolvedConfig& resolved, ParallelState& state,
                             int local_rank, const Backend& backend, std::ostream& out) {
  const Config& config = resolved.config();
  ASSIGN_OR_RETURN(const DataSplits data, BuildRankData(config, state.world(), local_rank));
  ASSIGN_OR_RETURN(RankOutputFiles files, OpenOutputFiles(config.logging(), state));
  ASSIGN_OR_RETURN(const RankRun run,
                   TrainOnRank(resolved, state, *data.train,
                               {&out, files.metrics.get(), files.tensorboard.get()},
                               {data.valid.get(), data.test.get()}, backend));
  RETURN_IF_ERROR(CloseOutputFiles(files, state.rank(), out));
  if (IsLoggingRank(state)) PrintRunEnd(run.result, backend, out);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunRank(const ResolvedConfig& resolved, const RankEnvironment* env,
                     std::ostream& out) {
  const Config& config = resolved.config();
  const int local_rank = env == nullptr ? 0 : env->local_rank;
  cpu::SetCpuThreads(CpuThreadsPerRank(config, env == nullptr));
  // The backend first: the groups move its tensors, through its transport.
  ASSIGN_OR_RETURN(const Backend backend, StartBackend(resolved, local_rank));
  ASSIGN_OR_RETURN(const std::unique_ptr<ParallelState> state,
                   CreateParallelState(resolved, env, backend));
  if (backend.ops != CpuBackend().ops && IsLoggingRank(*state)) {
    out << "conveyor: " << backend.description << "\n";
  }
  if (config.parallel().pipeline_rehearsal_ms() > 0) {
    RETURN_IF_ERROR(
        RunRehearsal(resolved, *state, IsLoggingRank(*state) ? &out : nullptr).status());
  } else {
    RETURN_IF_ERROR(TrainWithGroups(resolved, *state, local_rank, backend, out));
  }
  // The ranks meet once more, and the run directory's rendezvous files go.
  return state->Finish();
}

}  // namespace conveyor
