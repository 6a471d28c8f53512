#include "trainer/training_loop.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "absl/strings/str_format.h"
#include "model/parameter_placement.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/self_communicator.h"
#include "runtime/memory_tracker.h"
#include "runtime/status_macros.h"
#include "trainer/evaluation.h"
#include "trainer/exit_conditions.h"
#include "trainer/flops.h"
#include "trainer/lr_schedule.h"
#include "trainer/micro_batch_feed.h"
#include "trainer/pipeline_report.h"
#include "trainer/step_timers.h"
#include "trainer/training_checkpoints.h"
#include "trainer/training_log.h"

namespace conveyor {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Megatron's memory report, for every rank (gathered over `world`, which every rank
// must call with): the peak bytes of each category since the start.
absl::StatusOr<std::string> MemoryReport(int64_t iteration, Communicator& world) {
  const MemoryTracker& m = MemoryTracker::Global();
  constexpr double kMiB = 1024.0 * 1024.0;
  constexpr int kFields = 5;
  const float mine[kFields] = {
      static_cast<float>(m.peak_bytes(MemoryCategory::kWeights) / kMiB),
      static_cast<float>(m.peak_bytes(MemoryCategory::kGrads) / kMiB),
      static_cast<float>(m.peak_bytes(MemoryCategory::kOptimizer) / kMiB),
      static_cast<float>(m.peak_bytes(MemoryCategory::kActivations) / kMiB),
      static_cast<float>(m.peak_total() / kMiB)};
  std::vector<float> all(kFields * world.size());
  RETURN_IF_ERROR(world.AllGather(mine, kFields, all.data()));
  std::string report;
  for (int r = 0; r < world.size(); ++r) {
    const float* f = all.data() + kFields * r;
    absl::StrAppendFormat(&report,
                          "[rank %d] (after %d iterations) memory (MiB) | weights: %.1f | "
                          "grads: %.1f | optimizer: %.1f | max activations: %.1f | max total: "
                          "%.1f\n",
                          r, iteration, f[0], f[1], f[2], f[3], f[4]);
  }
  return report;
}

}  // namespace

absl::StatusOr<TrainingResult> Train(const Config& config, GptStage* stage,
                                     const SampleSource& data, const TrainingOutputs& out,
                                     const RankPlace& place, const EvaluationSplits& held_out) {
  const SampleSource* valid = held_out.valid;
  const TrainingConfig& t = config.training();
  const int64_t micro = t.micro_batch_size();
  const int64_t num_micro = t.num_micro_batches();
  const int64_t global_batch = t.global_batch_size();
  const int64_t seq = config.model().seq_length();
  const pipeline::ExecutorPlace& pipe = place.pipeline;
  ASSIGN_OR_RETURN(const pipeline::Plan plan,
                   pipeline::MakePlan(config.parallel().pipeline_schedule(), pipe.num_ranks,
                                      pipe.num_chunks, static_cast<int>(num_micro)));
  const std::vector<pipeline::Action>& actions = plan.ranks[pipe.rank];
  std::vector<Parameter*> params = stage->parameters();
  std::unique_ptr<ParameterUpdater> updater =
      MakeParameterUpdater(config, params, place.groups, place.optimizer_ops);
  const LrSchedule schedule(config.optimizer(), global_batch);
  const double flops_per_iteration =
      MegatronFlopsPerIteration(stage->chunk(0).shape(), global_batch);
  // The step's loss is the mean over all M * DP micro-batches: each contributes
  // 1 / (M * DP) to the gradient, and the DP sum completes the mean.
  const float loss_scale = 1.0f / static_cast<float>(num_micro * place.dp_size);

  const bool pipelined = pipe.num_ranks > 1 || pipe.num_chunks > 1;
  BubblePrediction prediction;
  if (pipelined) {
    ASSIGN_OR_RETURN(prediction, PredictBubble(config));
  }
  BubbleMeter bubble;
  std::vector<pipeline::TimedAction> step_timeline;

  SelfCommunicator alone;
  Communicator& world = place.world != nullptr ? *place.world : alone;
  const CheckpointConfig& ckpt = config.checkpoint();
  TrainingCheckpoints checkpoints(
      config, stage, updater.get(),
      {place.dp_rank, place.groups.tp != nullptr ? place.groups.tp->rank() : 0, place.dp_size,
       place.groups.tp != nullptr ? place.groups.tp->size() : 1, pipe.num_ranks, &world});
  ASSIGN_OR_RETURN(const ResumePoint resume, checkpoints.Load(out.log));
  RefreshComputeCopies(stage->ops(), params);
  TrainingResult result;
  result.consumed_samples = resume.consumed_samples;
  if (resume.iteration >= t.train_iters()) {
    // A relaunch of a finished run: the ranks agreed on the resume point, so all of
    // them return here, and nothing is saved, evaluated or traced again.
    if (out.log != nullptr) {
      *out.log << absl::StrFormat(
          "conveyor: nothing to train: --load %s resumes at iteration %d and --train-iters is "
          "%d; raise --train-iters to train further\n",
          ckpt.load(), resume.iteration, t.train_iters());
    }
    return result;
  }
  ExitConditions exit_conditions(ckpt);

  int64_t saved_iteration = resume.iteration;
  StepTimers timers;
  IntervalStats interval;
  double interval_seconds = 0.0, interval_loss = 0.0;
  int64_t interval_iters = 0, interval_good_iters = 0;
  int64_t iteration = resume.iteration;
  while (iteration < t.train_iters()) {
    ++iteration;
    const auto start = std::chrono::steady_clock::now();
    const int64_t step_first_sample = result.consumed_samples;
    MicroBatchFeed feed =
        MakeMicroBatchFeed(data, iteration, step_first_sample,
                           /*training=*/true, micro, seq, place.dp_rank, place.dp_size);
    for (Parameter* p : params) p->grad.SetZero();
    std::optional<StepTimers::Scope> phase(std::in_place, &timers, StepTimers::kForwardBackward);
    stage->BeginStep(feed, micro * seq, loss_scale);
    if (config.parallel().overlap_grad_reduce()) {
      stage->OnGradientsReady(static_cast<int>(num_micro), [&](const std::vector<Parameter*>& p) {
        updater->GradientsReady(p);
      });
    }
    step_timeline.clear();
    const auto pipeline_start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(pipeline::RunActions(actions, pipe, *stage, place.pp, &step_timeline));
    bubble.AddStep(step_timeline, SecondsSince(pipeline_start));
    // On a clock all local ranks share, for the merged trace.
    const double origin = std::chrono::duration<double>(pipeline_start.time_since_epoch()).count();
    for (pipeline::TimedAction& a : step_timeline) {
      a.start += origin;
      a.end += origin;
    }
    // First, as it waits for --overlap-grad-reduce's thread to leave the DP group
    // and the gradients alone. The sums below commute with it.
    phase.emplace(&timers, StepTimers::kGradsReduce);
    RETURN_IF_ERROR(updater->ReduceGradients());
    stage->SumLocalTiedCopies();
    // Only the last stage computes losses: the pipeline sum gives every rank the loss,
    // so that all of them agree on skipping a NaN step.
    double loss_sum = stage->loss_sum();
    if (place.pp != nullptr) RETURN_IF_ERROR(place.pp->AllReduceSum(&loss_sum, 1));
    if (place.groups.dp != nullptr) RETURN_IF_ERROR(place.groups.dp->AllReduceSum(&loss_sum, 1));
    const double loss = loss_sum / static_cast<double>(num_micro * place.dp_size);
    ASSIGN_OR_RETURN(const double grad_norm, updater->GradNorm());
    phase.emplace(&timers, StepTimers::kOptimizer);
    const double lr = schedule.ForIteration(iteration);
    const bool bad = !std::isfinite(loss) || !std::isfinite(grad_norm);
    if (bad) {
      ++result.nan_iterations;
      ++interval.nan_iterations;
      if (t.nan_policy() == "stop") {
        return absl::InternalError(absl::StrFormat(
            "iteration %d: lm loss is %g and gradient norm is %g; stopping "
            "(--nan-policy stop). Lower --lr, raise --lr-warmup-iters or set --clip-grad; "
            "--nan-policy skip skips such steps instead.",
            iteration, loss, grad_norm));
      }
      ++result.skipped_iterations;
      ++interval.skipped_iterations;
    } else {
      RETURN_IF_ERROR(updater->Step(grad_norm, lr));
      RefreshComputeCopies(stage->ops(), params);
      interval_loss += loss;
      ++interval_good_iters;
    }
    phase.reset();
    result.losses.push_back(loss);
    result.grad_norms.push_back(grad_norm);
    result.consumed_samples += global_batch;
    interval_seconds += SecondsSince(start);
    ++interval_iters;

    if (iteration == resume.iteration + 1) {
      ASSIGN_OR_RETURN(const std::string report, MemoryReport(iteration, world));
      if (out.log != nullptr) *out.log << report << std::flush;  // seen at once in a log
    }
    if (iteration % config.logging().log_interval() == 0 || iteration == t.train_iters()) {
      const double seconds_per_iteration = interval_seconds / interval_iters;
      const int64_t world = static_cast<int64_t>(place.dp_size) *
                            config.parallel().tensor_model_parallel_size() *
                            config.parallel().pipeline_model_parallel_size();
      interval.iteration = iteration;
      interval.train_iters = t.train_iters();
      interval.consumed_samples = result.consumed_samples;
      interval.ms_per_iteration = 1e3 * seconds_per_iteration;
      interval.tflops_per_gpu = flops_per_iteration / seconds_per_iteration / world / 1e12;
      interval.tokens_per_second = global_batch * seq / seconds_per_iteration;
      interval.learning_rate = lr;
      interval.global_batch_size = global_batch;
      interval.lm_loss = interval_good_iters > 0 ? interval_loss / interval_good_iters : NAN;
      interval.grad_norm = grad_norm;
      ASSIGN_OR_RETURN(const std::string timer_line, timers.Report(place.world, interval_iters));
      std::string bubble_line;
      if (pipelined) {
        ASSIGN_OR_RETURN(bubble_line, BubbleLine(prediction, bubble.fraction(), place.pp));
        bubble_line += "\n";
        bubble.Reset();
      }
      if (out.log != nullptr) {
        *out.log << FormatLogLine(interval) << "\n"
                 << timer_line << "\n"
                 << bubble_line << std::flush;
      }
      if (out.metrics != nullptr) *out.metrics << FormatMetricsJson(interval) << std::endl;
      interval = IntervalStats();
      interval_seconds = interval_loss = 0.0;
      interval_iters = interval_good_iters = 0;
    }
    if (valid != nullptr && config.data().eval_iters() > 0 &&
        iteration % config.data().eval_interval() == 0) {
      // Megatron's validation reader moves on: each evaluation sees new samples.
      const int64_t evaluation = iteration / config.data().eval_interval() - 1;
      ASSIGN_OR_RETURN(const double valid_loss,
                       Evaluate(config, stage, *valid,
                                evaluation * config.data().eval_iters() * global_batch, place));
      result.valid_losses.push_back(valid_loss);
      if (out.log != nullptr) {
        *out.log << FormatValidationLine(absl::StrCat("iteration ", iteration), valid_loss)
                 << std::endl;
      }
      if (out.metrics != nullptr) {
        *out.metrics << FormatValidationJson(iteration, valid_loss) << std::endl;
      }
    }
    const ResumePoint point{iteration, result.consumed_samples};
    if (!ckpt.save().empty() && ckpt.save_interval() > 0 && iteration % ckpt.save_interval() == 0) {
      RETURN_IF_ERROR(checkpoints.Save(point));
      saved_iteration = iteration;
    }
    std::string reason;
    ASSIGN_OR_RETURN(const bool exit, exit_conditions.ShouldExit(iteration, &world, &reason));
    if (exit) {
      if (out.log != nullptr) {
        *out.log << "conveyor: exiting after iteration " << iteration << ": " << reason
                 << (ckpt.save().empty() ? "" : "; saving a checkpoint") << "\n";
      }
      result.exited_early = true;
      break;
    }
  }
  if (!ckpt.save().empty() && saved_iteration != iteration) {
    RETURN_IF_ERROR(checkpoints.Save({iteration, result.consumed_samples}));
  }
  RETURN_IF_ERROR(checkpoints.Finish());
  stage->OnGradientsReady(0, nullptr);  // the callback refers to this function's updater
  if (!result.exited_early) {
    RETURN_IF_ERROR(EvaluateAfterTraining(config, stage, iteration, held_out, place, out, &result));
  }
  if (!config.logging().trace_file().empty()) {
    RETURN_IF_ERROR(WriteMergedTrace(config.logging().trace_file(), step_timeline, world));
  }
  return result;
}

}  // namespace conveyor
