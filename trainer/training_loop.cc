#include "trainer/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/moe_shape.h"
#include "model/parameter_placement.h"
#include "parallel/pipeline/schedule.h"
#include "profiler/recorder.h"
#include "proto/config_choices.h"
#include "runtime/memory_tracker.h"
#include "trainer/config/batch_rampup.h"
#include "trainer/config/document_masking.h"
#include "trainer/config/model_from_config.h"
#include "trainer/evaluation.h"
#include "trainer/exit_conditions.h"
#include "trainer/micro_batch_feed.h"
#include "trainer/optimization/expert_bias_update.h"
#include "trainer/optimization/lr_schedule.h"
#include "trainer/optimization/parameter_updater.h"
#include "trainer/pipeline_pass.h"
#include "trainer/planning/flops.h"
#include "trainer/planning/pipeline_report.h"
#include "trainer/reporting/interval_log.h"
#include "trainer/reporting/moe_metrics.h"
#include "trainer/reporting/step_profiler.h"
#include "trainer/reporting/training_log.h"
#include "trainer/training_checkpoints.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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

// What the updater steps: all of the stage's parameters, the norm skipping the head's
// copy of a tied word embedding (GptStage::TiedCopyInHead).
UpdatedParameters StageParameters(const GptStage& stage, std::vector<Parameter*> all) {
  UpdatedParameters params{std::move(all), {}};
  if (const Parameter* copy = stage.TiedCopyInHead()) params.norm_excluded.push_back(copy);
  return params;
}

// --nan-policy skip: after this many skipped steps in a row the run stops. A NaN step
// leaves the weights as they were, so one that keeps recurring means the weights or the
// data are broken, and every further step would be skipped too. Megatron has no such
// bound only because it stops at the first NaN (--check-for-nan-in-loss-and-grad); its
// fp16 loss scaler skips a handful of steps while it searches for a scale.
constexpr int64_t kMaxSkippedInARow = 10;

// One call of Train: what every step uses, and what the steps add up.
class TrainingRun {
 public:
  TrainingRun(const ResolvedConfig& resolved, const RankContext& context, GptStage* stage,
              const SampleSource& data, const TrainingOutputs& out,
              const EvaluationSplits& held_out, const OptimizerOps& optimizer_ops,
              std::vector<pipeline::Action> actions)
      : resolved_(resolved),
        config_(resolved.config()),
        t_(config_.training()),
        context_(context),
        stage_(stage),
        data_(data),
        out_(out),
        held_out_(held_out),
        actions_{{t_.num_micro_batches(), std::move(actions)}},
        optimizer_ops_(optimizer_ops),
        params_(stage->parameters()),
        updater_(MakeParameterUpdater(resolved, context, StageParameters(*stage, params_),
                                      &optimizer_ops)),
        schedule_(config_.optimizer(), t_.global_batch_size()),
        flops_per_iteration_(
            MegatronFlopsPerIteration(stage->chunk(0).shape(), t_.global_batch_size())),
        rampup_(config_),
        masking_(DocumentMaskingOf(config_)),
        pipelined_(context.pipeline().num_stages() > 1),
        checkpoints_(resolved, context, stage, updater_.get()),
        profiler_(config_.logging(), context.world().rank()),
        interval_log_(config_, context, out, flops_per_iteration_) {}

  ~TrainingRun() {  // the callbacks use updater_
    stage_->OnGradientsReady(0, nullptr);
    stage_->OnParametersNeeded(nullptr);
  }

  absl::StatusOr<TrainingResult> Run() {
    if (pipelined_) {
      ASSIGN_OR_RETURN(prediction_, PredictBubble(resolved_));
    }
    ASSIGN_OR_RETURN(const ResumePoint resume, checkpoints_.Load(out_.log));
    RefreshComputeCopies(stage_->ops(), params_);
    result_.consumed_samples = resume.consumed_samples;
    iteration_ = saved_iteration_ = first_iteration_ = resume.iteration;
    if (iteration_ >= t_.train_iters()) return NothingToTrain();
    if (const std::string late = profiler_.ResumedPastTheWindow(iteration_);
        !late.empty() && out_.log != nullptr) {
      *out_.log << "conveyor: " << late << "\n";
    }
    ExitConditions exit_conditions(config_.checkpoint());
    stage_->OnParametersNeeded(
        [this](const std::vector<Parameter*>& p) { return updater_->ParametersNeeded(p); });
    while (iteration_ < t_.train_iters()) {
      ++iteration_;
      const Clock::time_point start = Clock::now();
      profiler_.BeforeStep(iteration_);
      ASSIGN_OR_RETURN(const StepOutcome step, Step());
      profiler_.AfterStep(iteration_);
      interval_log_.AddStep(step, SecondsSince(start));
      if (iteration_ == resume.iteration + 1) {
        RETURN_IF_ERROR(ReportMemory());
      }
      RETURN_IF_ERROR(LogIterationToTensorBoard(step));
      RETURN_IF_ERROR(LogIfDue(step));
      RETURN_IF_ERROR(EvaluateDuringTraining(resolved_, context_, stage_, held_out_.valid, iteration_,
                                             out_, &result_));
      RETURN_IF_ERROR(SaveIfDue());
      ASSIGN_OR_RETURN(result_.exited_early, ExitIfAsked(exit_conditions));
      if (result_.exited_early) break;
    }
    return Finish();
  }

 private:
  // A relaunch of a finished run: the ranks agreed on the resume point, so all of them
  // return here, and nothing is saved, evaluated or traced again.
  TrainingResult NothingToTrain() const {
    if (out_.log != nullptr) {
      *out_.log << absl::StrFormat(
          "conveyor: nothing to train: --load %s resumes at iteration %d and --train-iters is "
          "%d; raise --train-iters to train further\n",
          config_.checkpoint().load(), iteration_, t_.train_iters());
    }
    return result_;
  }

  // --overlap-grad-reduce: the updater starts reducing gradients as backward
  // completes them (after `micro_batches` micro-batches).
  void WatchGradients(int64_t micro_batches) {
    if (!config_.parallel().overlap_grad_reduce() || micro_batches == watched_micro_batches_) {
      return;
    }
    watched_micro_batches_ = micro_batches;
    stage_->OnGradientsReady(
        static_cast<int>(micro_batches),
        [this](const std::vector<Parameter*>& p) { updater_->GradientsReady(p); });
  }

  // Forward and backward over the step's micro-batches, the gradients summed, the
  // optimizer step (or, for a NaN, the --nan-policy), and the step's records.
  absl::StatusOr<StepOutcome> Step() {
    StepOutcome step;
    // --rampup-batch-size: the samples consumed so far decide this step's global batch.
    step_batch_ = step.global_batch = rampup_.GlobalBatchAt(result_.consumed_samples);
    step_micro_batches_ = step_batch_ / (int64_t{t_.micro_batch_size()} * context_.dp_size());
    WatchGradients(step_micro_batches_);
    const profiler::Scope step_span("phase", absl::StrCat("iteration ", iteration_));
    {
      StepTimers::Scope phase(&interval_log_.timers(), StepTimers::kForwardBackward);
      const profiler::Scope span("phase", "forward-backward");
      RETURN_IF_ERROR(ForwardBackward());
    }
    {
      StepTimers::Scope phase(&interval_log_.timers(), StepTimers::kGradsReduce);
      const profiler::Scope span("phase", "grads-reduce");
      // First, as it waits for --overlap-grad-reduce's thread to leave the DP group
      // and the gradients alone. The sums below commute with it.
      RETURN_IF_ERROR(updater_->ReduceGradients());
      ASSIGN_OR_RETURN(step.loss,
                       MeanLossOverRanks(stage_->loss(), context_));
      ASSIGN_OR_RETURN(step.mtp_losses,
                       MtpLossesOverRanks(stage_->mtp_losses(), resolved_.model_shape().mtp_layers,
                                          step_micro_batches_, context_));
      ASSIGN_OR_RETURN(step.moe,
                       GatherMoeStepFigures(stage_, MtpLayerShape(resolved_.model_shape()).moe,
                                            LoadBalancingTypes(config_.model()),
                                            config_.model().num_layers() +
                                                config_.model().mtp_num_layers(),
                                            context_));
      ASSIGN_OR_RETURN(step.grad_norm, updater_->GradNorm());
      if (config_.logging().log_num_zeros_in_grad()) {
        ASSIGN_OR_RETURN(step.num_zeros, updater_->GradZeros());
      }
    }
    {
      StepTimers::Scope phase(&interval_log_.timers(), StepTimers::kOptimizer);
      const profiler::Scope span("phase", "optimizer");
      const StepLearningRates rates = rampup_.ramps()
                                          ? schedule_.RatesAfterSamples(result_.consumed_samples)
                                          : schedule_.RatesForIteration(iteration_);
      step.learning_rate = rates.main;
      step.decoupled_learning_rate = rates.decoupled;
      step.applied = StepApplies(step);
      RETURN_IF_ERROR(UpdateOrSkip(step));
      // --moe-router-enable-expert-bias: the step's token counts move the expert biases.
      RETURN_IF_ERROR(FinishExpertBiasStep(stage_, resolved_.model_shape().moe,
                                           step.applied, context_));
    }
    result_.losses.push_back(step.loss);
    result_.grad_norms.push_back(step.grad_norm);
    result_.consumed_samples += step_batch_;
    return step;
  }

  // How each micro-batch's loss weighs in this step's gradient: 1 / (M * DP) of its
  // mean, or, under --calculate-per-token-loss, its sum over the global batch's
  // unmasked tokens (Megatron scales the summed gradients by that count after
  // backward; scaling each token's gradient by it before the DP sum is the same).
  absl::StatusOr<LossWeighting> StepLossWeighting() const {
    if (!t_.calculate_per_token_loss()) {
      // The mean over the step's M * DP micro-batches: each contributes 1 / (M * DP) to
      // the gradient, and the DP sum completes the mean.
      return LossWeighting{1.0f / static_cast<float>(step_micro_batches_ * context_.dp_size())};
    }
    ASSIGN_OR_RETURN(const int64_t tokens,
                     CountLossTokens(data_, result_.consumed_samples, step_batch_,
                                     config_.model().seq_length(), masking_));
    // Megatron clamps the count to 1 as well.
    return LossWeighting{1.0f / static_cast<float>(std::max<int64_t>(tokens, 1)),
                         /*per_token=*/true};
  }

  // This rank's actions of --pipeline-schedule for this step's micro-batch count, made
  // when a step of --rampup-batch-size first needs them (validation checked the count).
  absl::StatusOr<const std::vector<pipeline::Action>*> StepActions() {
    auto it = actions_.find(step_micro_batches_);
    if (it == actions_.end()) {
      const pipeline::PipelinePlace& place = context_.pipeline();
      ASSIGN_OR_RETURN(pipeline::Plan plan,
                       pipeline::MakePlan(config_.parallel().pipeline_schedule(), place.num_ranks,
                                          place.num_chunks, static_cast<int>(step_micro_batches_)));
      it = actions_.emplace(step_micro_batches_, std::move(plan.ranks[place.rank])).first;
    }
    return &it->second;
  }

  // This rank's actions of the schedule over the step's global batch, timed for the
  // bubble and the trace.
  absl::Status ForwardBackward() {
    for (Parameter* p : params_) p->grad.SetZero();
    step_timeline_.clear();
    const PassInput input{&data_, result_.consumed_samples, /*training=*/true, iteration_};
    ASSIGN_OR_RETURN(const LossWeighting weighting, StepLossWeighting());
    const Clock::time_point start = Clock::now();
    ASSIGN_OR_RETURN(const std::vector<pipeline::Action>* actions, StepActions());
    RETURN_IF_ERROR(
        RunPipelinePass(resolved_, context_, *actions, input, weighting, stage_, &step_timeline_));
    bubble_.AddStep(step_timeline_, SecondsSince(start));
    // On a clock all local ranks share, for the merged trace.
    const double origin = std::chrono::duration<double>(start.time_since_epoch()).count();
    for (pipeline::TimedAction& a : step_timeline_) {
      a.start += origin;
      a.end += origin;
    }
    return absl::OkStatus();
  }

  // Whether the step updates the model: not when the loss or the gradient norm is NaN or inf.
  static bool StepApplies(const StepOutcome& step) {
    return std::isfinite(step.loss) && std::isfinite(step.grad_norm);
  }
  // The optimizer step, unless the step does not apply: then --nan-policy stops the run
  // or skips the step.
  absl::Status UpdateOrSkip(const StepOutcome& step) {
    if (step.applied) {
      RETURN_IF_ERROR(updater_->Step(step.grad_norm,
                                      {step.learning_rate, step.decoupled_learning_rate}));
      RefreshComputeCopies(stage_->ops(), params_);
      skipped_in_a_row_ = 0;
      return absl::OkStatus();
    }
    ++result_.nan_iterations;
    if (resolved_.nan_policy() == NanPolicy::kStop) {
      return absl::InternalError(absl::StrFormat(
          "iteration %d: lm loss is %g and gradient norm is %g; stopping "
          "(--nan-policy stop). Lower --lr, raise --lr-warmup-iters or set --clip-grad; "
          "--nan-policy skip skips such steps instead.",
          iteration_, step.loss, step.grad_norm));
    }
    ++result_.skipped_iterations;
    if (++skipped_in_a_row_ < kMaxSkippedInARow) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat(
        "iteration %d: the last %d steps had a NaN or inf loss or gradient norm and were all "
        "skipped (--nan-policy skip); the model has diverged or its data is broken, so the run "
        "stops without saving. Resume from the last checkpoint with a lower --lr, a higher "
        "--lr-warmup-iters or --clip-grad",
        iteration_, skipped_in_a_row_));
  }

  // Whether every step since iteration `since` was skipped: the weights are those of
  // iteration `since`, and a checkpoint would claim iterations that never trained.
  bool AllSkippedSince(int64_t since) const {
    return iteration_ > since && skipped_in_a_row_ >= iteration_ - since;
  }

  absl::Status ReportMemory() {
    const MemoryTracker& tracker = MemoryTracker::Global();
    result_.model_state = {tracker.live_bytes(MemoryCategory::kWeights),
                           tracker.live_bytes(MemoryCategory::kGrads),
                           tracker.live_bytes(MemoryCategory::kOptimizer)};
    ASSIGN_OR_RETURN(const std::string report, MemoryReport(iteration_, context_.world()));
    if (out_.log != nullptr) *out_.log << report << std::flush;  // seen at once in a log
    return absl::OkStatus();
  }

  // Every --log-interval iterations and at the last: the interval's report, with the
  // pipeline bubble measured since the previous one.
  absl::Status LogIfDue(const StepOutcome& step) {
    if (!interval_log_.Due(iteration_)) return absl::OkStatus();
    if (!pipelined_) {
      return interval_log_.Report(iteration_, result_.consumed_samples, step, nullptr);
    }
    IntervalBubble bubble;
    bubble.formula = prediction_.formula;
    bubble.simulated = prediction_.simulated;
    ASSIGN_OR_RETURN(bubble.line, BubbleLine(prediction_, bubble_.fraction(), context_.pp(),
                                             &bubble.measured));
    bubble_.Reset();
    return interval_log_.Report(iteration_, result_.consumed_samples, step, &bubble);
  }

  // --tensorboard-dir: this iteration's figures, of which MegatronScalars keeps every
  // --tensorboard-log-interval-th. The params norm is a collective, so every rank of a
  // run that logs it computes it, not only the one that writes.
  absl::Status LogIterationToTensorBoard(const StepOutcome& step) {
    const LoggingConfig& logging = config_.logging();
    if (logging.tensorboard_dir().empty() ||
        iteration_ % logging.tensorboard_log_interval() != 0) {
      return absl::OkStatus();
    }
    tensorboard::IterationFigures f;
    if (logging.log_params_norm()) {
      ASSIGN_OR_RETURN(f.params_norm, updater_->ParamsNorm());
    }
    if (out_.tensorboard == nullptr) return absl::OkStatus();
    f.iteration = iteration_;
    f.consumed_samples = result_.consumed_samples;
    f.lm_loss = step.loss;
    f.learning_rate = step.learning_rate;
    f.grad_norm = step.grad_norm;
    f.num_zeros = step.num_zeros;
    f.global_batch_size = step_batch_;
    f.world_size = context_.world().size();
    if (logging.log_memory_to_tensorboard()) {
      const MemoryTracker& m = MemoryTracker::Global();
      f.memory_bytes = {{"allocated", static_cast<double>(m.live_total())},
                        {"max-allocated", static_cast<double>(m.peak_total())}};
      for (int c = 0; c < kNumMemoryCategories; ++c) {
        const auto category = static_cast<MemoryCategory>(c);
        f.memory_bytes.emplace_back(MemoryCategoryName(category), m.live_bytes(category));
      }
    }
    out_.tensorboard->Iteration(f);
    return absl::OkStatus();
  }

  absl::Status SaveIfDue() {
    const CheckpointConfig& ckpt = config_.checkpoint();
    if (ckpt.save().empty() || ckpt.save_interval() <= 0 ||
        iteration_ % ckpt.save_interval() != 0) {
      return absl::OkStatus();
    }
    if (AllSkippedSince(saved_iteration_)) {
      if (out_.log != nullptr) {
        *out_.log << absl::StrFormat(
            "conveyor: not saving iteration %d: every step since iteration %d was skipped "
            "(--nan-policy skip), so its weights are iteration %d's\n",
            iteration_, saved_iteration_, saved_iteration_);
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(checkpoints_.Save({iteration_, result_.consumed_samples}));
    saved_iteration_ = iteration_;
    return absl::OkStatus();
  }

  absl::StatusOr<bool> ExitIfAsked(ExitConditions& exit_conditions) {
    std::string reason;
    ASSIGN_OR_RETURN(const bool exit,
                     exit_conditions.ShouldExit(iteration_, context_.world(), &reason));
    if (exit && out_.log != nullptr) {
      *out_.log << "conveyor: exiting after iteration " << iteration_ << ": " << reason
                << (config_.checkpoint().save().empty() ? "" : "; saving a checkpoint") << "\n";
    }
    return exit;
  }

  // The last save, the final evaluations of a completed run, and the trace.
  absl::StatusOr<TrainingResult> Finish() {
    if (AllSkippedSince(first_iteration_)) {
      return absl::InternalError(absl::StrFormat(
          "iteration %d: every one of this run's %d steps had a NaN or inf loss or gradient "
          "norm and was skipped (--nan-policy skip): nothing was trained, and nothing was "
          "saved. Lower --lr, raise --lr-warmup-iters or set --clip-grad",
          iteration_, iteration_ - first_iteration_));
    }
    // What the run leaves (the stage's parameters, a final checkpoint) is current.
    RETURN_IF_ERROR(updater_->ParametersCurrent());
    if (!config_.checkpoint().save().empty() && saved_iteration_ != iteration_) {
      RETURN_IF_ERROR(checkpoints_.Save({iteration_, result_.consumed_samples}));
    }
    RETURN_IF_ERROR(checkpoints_.Finish());
    if (!result_.exited_early) {
      RETURN_IF_ERROR(
          EvaluateAfterTraining(resolved_, context_, stage_, iteration_, held_out_, out_, &result_));
    }
    const std::string& trace_file = config_.logging().trace_file();
    if (!trace_file.empty()) {
      RETURN_IF_ERROR(WriteMergedTrace(trace_file, step_timeline_, context_.world()));
    }
    RETURN_IF_ERROR(profiler_.Finish(
        absl::StrFormat("rank %d (tp %d, pp %d, dp %d)", context_.world().rank(),
                        context_.tp_rank(), context_.pipeline().rank, context_.dp_rank()),
        context_.world()));
    return result_;
  }

  const ResolvedConfig& resolved_;
  const Config& config_;  // resolved_.config()
  const TrainingConfig& t_;
  const RankContext& context_;
  GptStage* stage_;
  const SampleSource& data_;
  const TrainingOutputs& out_;
  const EvaluationSplits& held_out_;
  // This rank's actions of --pipeline-schedule, by the step's micro-batch count.
  std::map<int64_t, std::vector<pipeline::Action>> actions_;
  const OptimizerOps& optimizer_ops_;
  const std::vector<Parameter*> params_;
  const std::unique_ptr<ParameterUpdater> updater_;
  const LrSchedule schedule_;
  const double flops_per_iteration_;
  const BatchRampup rampup_;
  const DocumentMasking masking_;
  const bool pipelined_;
  TrainingCheckpoints checkpoints_;
  profiler::StepProfiler profiler_;
  BubblePrediction prediction_;
  BubbleMeter bubble_;
  std::vector<pipeline::TimedAction> step_timeline_;  // the last step's, for the trace
  IntervalLog interval_log_;

  TrainingResult result_;
  int64_t iteration_ = 0;        // the last completed (or, in a step, the current) one
  int64_t saved_iteration_ = 0;  // of the last checkpoint
  int64_t first_iteration_ = 0;  // where this launch resumed
  int64_t skipped_in_a_row_ = 0;  // --nan-policy skip: the steps skipped since the last applied
  // This step's global batch and micro-batches per DP rank (--rampup-batch-size).
  int64_t step_batch_ = 0;
  int64_t step_micro_batches_ = 0;
  int64_t watched_micro_batches_ = 0;  // what --overlap-grad-reduce counts to
};

}  // namespace

absl::StatusOr<TrainingResult> Train(const ResolvedConfig& config, const RankContext& context,
                                     GptStage* stage, const SampleSource& data,
                                     const TrainingOutputs& out, const EvaluationSplits& held_out,
                                     const OptimizerOps& optimizer_ops) {
  const pipeline::PipelinePlace& place = context.pipeline();
  ASSIGN_OR_RETURN(pipeline::Plan plan,
                   pipeline::MakePlan(config.config().parallel().pipeline_schedule(),
                                      place.num_ranks, place.num_chunks, config.micro_batches()));
  TrainingRun run(config, context, stage, data, out, held_out, optimizer_ops,
                  std::move(plan.ranks[place.rank]));
  return run.Run();
}

}  // namespace conveyor
