#include "trainer/config/size_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace {

// Collects the problems of one config.
class Limits {
 public:
  void Check(absl::string_view source, int64_t value, const SizeLimit& limit,
             absl::string_view fix = "") {
    std::optional<std::string> problem = SizeLimitProblem(source, value, limit, fix);
    if (problem.has_value()) lines_.push_back(*std::move(problem));
  }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  std::vector<std::string> lines_;
};

void CheckModel(const ModelConfig& m, Limits* out) {
  out->Check("--num-layers", m.num_layers(), kMaxLayers);
  out->Check("--mtp-num-layers", m.mtp_num_layers(), kMaxLayers);
  out->Check("--num-experts", m.num_experts(), kMaxExperts);
  if (m.num_experts() > 0 && m.num_layers() > 0 && m.num_layers() <= kMaxLayers.max &&
      m.num_experts() <= kMaxExperts.max) {
    out->Check(absl::StrCat("the experts of all layers, --num-layers ", m.num_layers(),
                            " x --num-experts ", m.num_experts(), " ="),
               int64_t{m.num_layers()} * m.num_experts(), kMaxLayerExperts,
               "; use fewer layers or experts");
  }
  out->Check("--hidden-size", m.hidden_size(), kMaxHidden);
  out->Check("--ffn-hidden-size", m.ffn_hidden_size(), kMaxFfnHidden);
  out->Check("--moe-ffn-hidden-size", m.moe_ffn_hidden_size(), kMaxFfnHidden);
  out->Check("--moe-shared-expert-intermediate-size", m.moe_shared_expert_intermediate_size(),
             kMaxFfnHidden);
  out->Check("--num-attention-heads", m.num_attention_heads(), kMaxHeads);
  out->Check("--num-query-groups", m.num_query_groups(), kMaxHeads);
  out->Check("--kv-channels", m.kv_channels(), kMaxHeads);
  out->Check("--seq-length", m.seq_length(), kMaxSequence);
  out->Check("--max-position-embeddings", m.max_position_embeddings(), kMaxSequence);
  out->Check("--vocab-size", m.vocab_size(), kMaxVocabulary);
  out->Check("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by(), kMaxVocabulary);
  const double parameters = EstimatedParameters(m);
  if (parameters > static_cast<double>(kMaxParameters.max)) {
    out->Check(
        "the model's parameters (estimated from --num-layers, --hidden-size, "
        "--ffn-hidden-size, --num-experts and --vocab-size)",
        static_cast<int64_t>(std::min(parameters, 9e18)), kMaxParameters, "; choose smaller sizes");
  }
}

// A training step's micro-batches, M, over its pipeline stages (PP x V), as the executor
// lists them.
void CheckStepActions(const Config& c, int64_t data_parallel, Limits* out) {
  const TrainingConfig& t = c.training();
  const ParallelConfig& p = c.parallel();
  const int64_t per_micro = int64_t{t.micro_batch_size()} * data_parallel;
  const int64_t pp = p.pipeline_model_parallel_size();
  if (per_micro <= 0 || pp <= 0) return;  // their own rules report them
  const int64_t micro_batches = t.global_batch_size() > 0 ? t.global_batch_size() / per_micro
                                                          : std::max(1, t.num_micro_batches());
  int64_t virtual_stages = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  if (p.num_layers_per_virtual_pipeline_stage() > 0) {
    virtual_stages = std::max<int64_t>(
        1, c.model().num_layers() / pp / p.num_layers_per_virtual_pipeline_stage());
  }
  out->Check(absl::StrCat("a training step's forward and backward actions, PP ", pp, " x V ",
                          virtual_stages, " x M ", micro_batches,
                          " micro-batches (--global-batch-size / (--micro-batch-size x DP)) ="),
             // In double first: PP and V are flags of their own, up to 2^31 each.
             static_cast<int64_t>(
                 std::min(9e18, static_cast<double>(pp) * static_cast<double>(virtual_stages) *
                                    static_cast<double>(micro_batches))),
             kMaxStepActions,
             "; use a smaller --global-batch-size or a larger --micro-batch-size (--dry-run "
             "plans any size)");
}

// --rampup-batch-size START INCREMENT SAMPLES towards the global batch (the flag's, or
// the micro-batches' when it is 0 and DP is known).
void CheckRamp(const TrainingConfig& t, int64_t data_parallel, Limits* out) {
  out->Check("--rampup-batch-size's SAMPLES", t.rampup_batch_size(2), kMaxSamples);
  const int64_t global = t.global_batch_size() > 0 ? t.global_batch_size()
                                                   : int64_t{std::max(1, t.num_micro_batches())} *
                                                         t.micro_batch_size() * data_parallel;
  const int64_t start = t.rampup_batch_size(0), increment = t.rampup_batch_size(1);
  if (start <= 0 || increment <= 0 || global <= start) return;  // RampupProblems reports
  out->Check(
      absl::StrCat("the increments of --rampup-batch-size ", start, " ", increment,
                   " towards --global-batch-size ", global, ", (GLOBAL - START) / INCREMENT ="),
      (global - start) / increment, kMaxRampIncrements,
      absl::StrCat("; choose an INCREMENT of at least ",
                   (global - start + kMaxRampIncrements.max - 1) / kMaxRampIncrements.max));
}

}  // namespace

std::optional<std::string> SizeLimitProblem(absl::string_view source, int64_t value,
                                            const SizeLimit& limit, absl::string_view fix) {
  if (value <= limit.max) return std::nullopt;
  return absl::StrCat(
      source, " ", value, " is more than ", limit.max, ", the largest Conveyor accepts (",
      limit.why, ")",
      fix.empty() ? absl::StrCat("; set ", source, " to at most ", limit.max) : std::string(fix));
}

double EstimatedParameters(const ModelConfig& m) {
  const double hidden = std::max(0, m.hidden_size());
  const double ffn = m.ffn_hidden_size() > 0 ? m.ffn_hidden_size() : 4.0 * hidden;
  const double experts = std::max(0, m.num_experts());
  const double expert_ffn = m.moe_ffn_hidden_size() > 0 ? m.moe_ffn_hidden_size() : ffn;
  // Attention's four projections, then a dense MLP (up to three matrices under SwiGLU)
  // or every expert's, and a shared expert.
  const double mlp = experts > 0
                         ? 3.0 * hidden * expert_ffn * experts +
                               3.0 * hidden * std::max(0, m.moe_shared_expert_intermediate_size())
                         : 3.0 * hidden * ffn;
  const double layer = 4.0 * hidden * hidden + mlp;
  const double rows = 2.0 * std::max(0, m.vocab_size()) + std::max(0, m.max_position_embeddings());
  return std::max(0, m.num_layers()) * layer + rows * hidden;
}

std::vector<std::string> SizeLimitProblems(const Config& config, int64_t data_parallel) {
  Limits out;
  CheckModel(config.model(), &out);
  const TrainingConfig& t = config.training();
  out.Check(absl::StrCat("the tokens of a micro-batch, --micro-batch-size ", t.micro_batch_size(),
                         " x --seq-length ", config.model().seq_length(), " ="),
            int64_t{t.micro_batch_size()} * config.model().seq_length(), kMaxMicroBatchTokens,
            "; use a smaller micro-batch or sequence");
  out.Check("--train-samples", t.train_samples(), kMaxSamples);
  if (t.rampup_batch_size_size() == 3) CheckRamp(t, data_parallel, &out);
  out.Check("--lr-warmup-samples", config.optimizer().lr_warmup_samples(), kMaxSamples);
  out.Check("--lr-decay-samples", config.optimizer().lr_decay_samples(), kMaxSamples);
  out.Check("--nproc-per-node", config.parallel().nproc_per_node(), kMaxRanksPerNode);
  if (!t.dry_run()) CheckStepActions(config, data_parallel, &out);
  return out.Take();
}

}  // namespace conveyor
