#include "trainer/config/config_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "data/blend.h"
#include "data/tokenizer_settings.h"
#include "google/protobuf/message.h"
#include "model/pipeline_split.h"
#include "parallel/pipeline/schedule.h"
#include "proto/config_choices.h"
#include "trainer/config/attention_positions.h"
#include "trainer/config/batch_rampup.h"
#include "trainer/config/flags.h"
#include "trainer/config/lr_validation.h"
#include "trainer/config/model_from_config.h"
#include "trainer/config/mla_validation.h"
#include "trainer/config/moe_validation.h"
#include "trainer/config/mtp_validation.h"
#include "trainer/config/size_limits.h"

namespace conveyor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Collects problem lines; the helpers keep the common range rules one-liners.
class Problems {
 public:
  template <typename... Parts>
  void Add(const Parts&... parts) {
    lines_.push_back(absl::StrCat(parts...));
  }
  void Positive(const char* flag, int64_t v) {
    if (v <= 0) Add(flag, " ", v, " must be positive: set ", flag, " to 1 or more");
  }
  // For sizes where 0 means "derive it" (or "off").
  void NonNegative(const char* flag, int64_t v) {
    if (v < 0) Add(flag, " ", v, " must not be negative: set ", flag, " to 0 or more");
  }
  void PositiveReal(const char* flag, double v) {
    if (!(v > 0) || !std::isfinite(v)) {
      Add(flag, " ", v, " must be a positive number: set ", flag, " > 0");
    }
  }
  void NonNegativeReal(const char* flag, double v) {
    if (!(v >= 0) || !std::isfinite(v)) {
      Add(flag, " ", v, " must not be negative: set ", flag, " >= 0");
    }
  }
  // Probabilities and decay rates: 1 would drop everything or never forget.
  void HalfOpenUnit(const char* flag, double v) {
    if (!(v >= 0 && v < 1)) Add(flag, " ", v, " must be in [0, 1): set ", flag, " >= 0 and < 1");
  }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  std::vector<std::string> lines_;
};

// Values the rules share; each is 0 where its inputs are themselves invalid, so a
// broken input is reported once, by its own rule.
struct Derived {
  int64_t heads = 0;
  int64_t query_groups = 0;
  int64_t kv_channels = 0;
  int64_t ffn = 0;
  int64_t tp = 0;
  int64_t pp = 0;
  int64_t cp = 0;
  int64_t dp = 0;
  int64_t split_layers = 0;  // layers plus embedding/loss when they count in the split
  bool uneven = false;
};

Derived Derive(const Config& c, int world_size) {
  const ModelConfig& m = c.model();
  const ParallelConfig& p = c.parallel();
  Derived d;
  d.heads = std::max(0, m.num_attention_heads());
  // Megatron's --group-query-attention without --num-query-groups means one group.
  d.query_groups = m.num_query_groups() > 0    ? m.num_query_groups()
                   : m.group_query_attention() ? 1
                                               : d.heads;
  if (m.kv_channels() > 0) {
    d.kv_channels = m.kv_channels();
  } else if (d.heads > 0 && m.hidden_size() > 0 && m.hidden_size() % d.heads == 0) {
    d.kv_channels = m.hidden_size() / d.heads;
  }
  // Megatron shrinks the SwiGLU MLP to keep its parameter count; Conveyor keeps
  // 4 * hidden so the default model is the same with or without --swiglu.
  d.ffn = m.ffn_hidden_size() > 0 ? m.ffn_hidden_size() : 4 * int64_t{std::max(0, m.hidden_size())};
  d.tp = std::max(0, p.tensor_model_parallel_size());
  d.pp = std::max(0, p.pipeline_model_parallel_size());
  d.cp = std::max(0, p.context_parallel_size());
  if (world_size > 0 && d.tp > 0 && d.pp > 0 && d.cp > 0 &&
      world_size % (d.tp * d.cp * d.pp) == 0) {
    d.dp = world_size / (d.tp * d.cp * d.pp);
  }
  const PipelineSplit split = PipelineSplitFromConfig(c);
  d.uneven = split.uneven();
  d.split_layers = split.slots();
  return d;
}

// What tensor parallelism splits must divide evenly over TP.
void CheckTensorParallelSplit(const Config& c, const Derived& d, Problems* out) {
  if (d.tp <= 0) return;
  const ModelConfig& m = c.model();
  if (d.heads > 0 && d.heads % d.tp != 0) {
    out->Add("--num-attention-heads ", d.heads,
             " is not divisible by --tensor-model-parallel-size ", d.tp,
             ": each tensor-parallel rank holds whole heads; choose a TP size dividing the "
             "head count");
  }
  if (m.num_query_groups() > 0 && m.num_query_groups() % d.tp != 0) {
    out->Add("--num-query-groups ", m.num_query_groups(),
             " is not divisible by --tensor-model-parallel-size ", d.tp,
             ": each tensor-parallel rank holds whole key/value groups; choose a TP size "
             "dividing num-query-groups");
  }
  if (d.ffn > 0 && d.ffn % d.tp != 0) {
    out->Add("--ffn-hidden-size ", d.ffn, m.ffn_hidden_size() == 0 ? " (4 * --hidden-size)" : "",
             " is not divisible by --tensor-model-parallel-size ", d.tp,
             ": the MLP is split by columns over TP; choose an ffn-hidden-size divisible by TP");
  }
  if (c.parallel().sequence_parallel() && d.tp > 1 && d.cp > 0 && m.seq_length() > 0 &&
      (m.seq_length() / d.cp) % d.tp != 0) {
    out->Add("--sequence-parallel needs --seq-length ", m.seq_length(),
             d.cp > 1 ? absl::StrCat(" / --context-parallel-size ", d.cp) : "",
             " divisible by --tensor-model-parallel-size ", d.tp,
             ": the sequence is split evenly over TP ranks");
  }
  if (c.parallel().overlap_param_gather() && !c.parallel().use_distributed_optimizer()) {
    out->Add("--overlap-param-gather needs --use-distributed-optimizer: only the distributed "
             "optimizer gathers parameters after its step (as in Megatron)");
  }
}

// The position embedding's own rules.
void CheckPositions(const Config& c, const Derived& d, Problems* out) {
  const ModelConfig& m = c.model();
  const std::optional<PositionEmbeddingType> positions =
      ParseChoice<PositionEmbeddingType>(m.position_embedding_type());
  if (positions == PositionEmbeddingType::kRope || positions == PositionEmbeddingType::kYarn) {
    if (d.kv_channels % 2 != 0) {
      out->Add("--kv-channels ", d.kv_channels,
               m.kv_channels() == 0 ? " (--hidden-size / --num-attention-heads)" : "",
               " is odd: --position-embedding-type ", m.position_embedding_type(),
               " rotates pairs of channels; choose an even head dimension");
    }
    out->PositiveReal("--rotary-base", m.rotary_base());
    // Megatron's rotary dimension, int(kv_channels * rotary_percent).
    const int64_t rotated = static_cast<int64_t>(d.kv_channels * double{m.rotary_percent()});
    if (!(m.rotary_percent() > 0.0f && m.rotary_percent() <= 1.0f)) {
      out->Add("--rotary-percent ", m.rotary_percent(), " must be in (0, 1]");
    } else if (d.kv_channels % 2 == 0 && (rotated < 2 || rotated % 2 != 0)) {
      out->Add("--rotary-percent ", m.rotary_percent(), " of --kv-channels ", d.kv_channels,
               " rotates ", rotated,
               " channels: RoPE rotates pairs, so choose a fraction giving an even number >= 2");
    }
  } else if (positions == PositionEmbeddingType::kLearnedAbsolute &&
             m.max_position_embeddings() > 0 && m.max_position_embeddings() < m.seq_length()) {
    out->Add("--max-position-embeddings ", m.max_position_embeddings(),
             " is smaller than --seq-length ", m.seq_length(),
             ": the learned position table needs a row per position; set "
             "--max-position-embeddings >= seq-length, or 0 for seq-length");
  }
}

void CheckModel(const Config& c, const Derived& d, Problems* out) {
  const ModelConfig& m = c.model();
  out->Positive("--num-layers", m.num_layers());
  out->Positive("--hidden-size", m.hidden_size());
  out->Positive("--num-attention-heads", m.num_attention_heads());
  out->Positive("--seq-length", m.seq_length());
  out->Positive("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by());
  out->NonNegative("--ffn-hidden-size", m.ffn_hidden_size());
  out->NonNegative("--num-query-groups", m.num_query_groups());
  if (m.has_group_query_attention() && !m.group_query_attention() && m.num_query_groups() > 0) {
    out->Add("--num-query-groups ", m.num_query_groups(),
             " and --group-query-attention=false contradict: Megatron ignores the groups "
             "without --group-query-attention, Conveyor uses them; drop one of the two");
  }
  out->NonNegative("--kv-channels", m.kv_channels());
  out->NonNegative("--max-position-embeddings", m.max_position_embeddings());
  out->NonNegative("--vocab-size", m.vocab_size());
  if (m.kv_channels() == 0 && m.hidden_size() > 0 && d.heads > 0 &&
      m.hidden_size() % d.heads != 0) {
    out->Add("--hidden-size ", m.hidden_size(), " is not divisible by --num-attention-heads ",
             d.heads,
             ": choose sizes with hidden-size % num-attention-heads == 0, or set "
             "--kv-channels");
  }
  if (m.num_query_groups() > 0 && d.heads > 0 && d.heads % m.num_query_groups() != 0) {
    out->Add("--num-attention-heads ", d.heads, " is not divisible by --num-query-groups ",
             m.num_query_groups(),
             ": every key/value group serves the same number of heads; "
             "choose num-query-groups dividing num-attention-heads");
  }
  CheckTensorParallelSplit(c, d, out);
  if (m.ffn_hidden_size() == 0 && d.ffn > kInt32Max) {
    out->Add("--hidden-size ", m.hidden_size(),
             " is too large: the derived --ffn-hidden-size "
             "4 * hidden-size does not fit in int32; set a smaller hidden size");
  }
  CheckPositions(c, d, out);
  if (m.squared_relu() && m.swiglu()) {
    out->Add("--squared-relu and --swiglu are exclusive (Megatron asserts it): the MLP has one "
             "activation; drop one of them");
  }
  if (m.squared_relu() && m.num_experts() > 0) {
    out->Add("--squared-relu with --num-experts: the experts' squared ReLU is not implemented "
             "(the dense MLP has it); drop one of them");
  }
  out->HalfOpenUnit("--hidden-dropout", m.hidden_dropout());
  out->HalfOpenUnit("--attention-dropout", m.attention_dropout());
  out->PositiveReal("--norm-epsilon", m.norm_epsilon());
  out->PositiveReal("--init-method-std", m.init_method_std());
}

// The virtual stages per pipeline rank the flags ask for, or 0 when the virtual-pipeline
// flags themselves are inconsistent (reported here).
int64_t CheckVirtualPipeline(const Config& c, const Derived& d, Problems* out) {
  const ParallelConfig& p = c.parallel();
  const int64_t per_stage = p.num_layers_per_virtual_pipeline_stage();
  const int64_t v = p.num_virtual_stages_per_pipeline_rank();
  out->NonNegative("--num-layers-per-virtual-pipeline-stage", per_stage);
  out->NonNegative("--num-virtual-stages-per-pipeline-rank", v);
  if (per_stage < 0 || v < 0) return 0;
  if (per_stage > 0 && v > 0) {
    out->Add(
        "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank "
        "are exclusive: set only one of them");
    return 0;
  }
  if (d.pp == 1 && (per_stage > 0 || v > 1)) {
    out->Add(per_stage > 0 ? "--num-layers-per-virtual-pipeline-stage"
                           : "--num-virtual-stages-per-pipeline-rank",
             " needs --pipeline-model-parallel-size > 1: virtual stages interleave a pipeline; "
             "set PP > 1 or drop the flag");
    return 0;
  }
  if (per_stage == 0) return std::max<int64_t>(v, 1);
  if (d.uneven) {
    out->Add(
        "--num-layers-per-virtual-pipeline-stage does not work with an uneven split "
        "(--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers): use "
        "--num-virtual-stages-per-pipeline-rank instead");
    return 0;
  }
  // The per-rank share must exist first; LayersPerStage reports it otherwise.
  if (d.pp <= 0 || d.split_layers % d.pp != 0) return 1;
  const int64_t per_rank = d.split_layers / d.pp;
  if (per_rank % per_stage != 0) {
    out->Add("--num-layers-per-virtual-pipeline-stage ", per_stage, " does not divide the ",
             per_rank,
             " layers per pipeline rank (--num-layers / --pipeline-model-parallel-size = ",
             d.split_layers, " / ", d.pp, "): choose a divisor of ", per_rank);
    return 0;
  }
  return per_rank / per_stage;
}

// The flags of the layer split; the arithmetic is the run's own (model/pipeline_split),
// so validation and training cannot disagree.
void CheckPipelineSplit(const Config& c, const Derived& d, int64_t virtual_stages, Problems* out) {
  const ParallelConfig& p = c.parallel();
  const int64_t first = p.decoder_first_pipeline_num_layers();
  const int64_t last = p.decoder_last_pipeline_num_layers();
  out->NonNegative("--decoder-first-pipeline-num-layers", first);
  out->NonNegative("--decoder-last-pipeline-num-layers", last);
  if (d.pp <= 0 || c.model().num_layers() <= 0 || first < 0 || last < 0) return;
  if (d.uneven && d.pp == 1) {
    out->Add(
        "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers need "
        "--pipeline-model-parallel-size > 1: with one stage there is nothing to split");
    return;
  }
  if (d.uneven &&
      (p.account_for_embedding_in_pipeline_split() || p.account_for_loss_in_pipeline_split())) {
    out->Add(
        "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers and "
        "--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split "
        "are exclusive: choose the uneven split yourself or let Conveyor account for them");
  }
  if (virtual_stages <= 0) return;
  PipelineSplit split = PipelineSplitFromConfig(c);
  split.virtual_stages = static_cast<int>(virtual_stages);
  const absl::StatusOr<std::vector<int64_t>> layers = LayersPerStage(split);
  if (!layers.ok()) out->Add(layers.status().message());
}

// Context parallelism cuts each sample into 2 * CP equal chunks (Megatron's load
// balancing); its ring attention runs on the CPU backend only so far.
void CheckContextParallel(const Config& c, const Derived& d, Problems* out) {
  if (d.cp <= 1) return;
  const int64_t seq = c.model().seq_length();
  if (seq > 0 && seq % (2 * d.cp) != 0) {
    out->Add("--context-parallel-size ", d.cp, " needs --seq-length ", seq,
             " divisible by 2 * CP = ", 2 * d.cp,
             ": each sample is cut into 2 * CP equal chunks, rank r holding chunks r and "
             "2CP-1-r; choose a sequence length that is a multiple of ", 2 * d.cp);
  }
  if (ParseChoice<DeviceKind>(c.parallel().device()) == DeviceKind::kCuda) {
    out->Add("--context-parallel-size ", d.cp,
             " with --device cuda: ring attention's CUDA kernels have never run on a GPU "
             "(cuda_attention_test checks them when one is there); run context parallelism "
             "with --device cpu, or use --context-parallel-size 1");
  }
}

void CheckParallel(const Config& c, const Derived& d, int world_size, Problems* out) {
  const ParallelConfig& p = c.parallel();
  out->Positive("--tensor-model-parallel-size", p.tensor_model_parallel_size());
  out->Positive("--pipeline-model-parallel-size", p.pipeline_model_parallel_size());
  out->Positive("--context-parallel-size", p.context_parallel_size());
  out->Positive("--nproc-per-node", p.nproc_per_node());
  out->Positive("--nnodes", p.nnodes());
  out->Positive("--ddp-bucket-size", p.ddp_bucket_size());
  out->Positive("--distributed-timeout-minutes", p.distributed_timeout_minutes());
  out->NonNegativeReal("--pipeline-rehearsal-ms", p.pipeline_rehearsal_ms());
  if (world_size <= 0) {
    out->Add("--nproc-per-node / --nnodes: the world size ", world_size,
             " must be positive: set WORLD_SIZE or SLURM_NTASKS to a positive integer, or unset "
             "them and use --nproc-per-node and --nnodes");
  } else if (d.tp > 0 && d.pp > 0 && d.cp > 0 && world_size % (d.tp * d.cp * d.pp) != 0) {
    const std::string cp_text =
        d.cp > 1 ? absl::StrCat(" * --context-parallel-size ", d.cp) : std::string();
    out->Add("--tensor-model-parallel-size ", d.tp, cp_text, " * --pipeline-model-parallel-size ",
             d.pp, " = ", d.tp * d.cp * d.pp, " does not divide the world size ", world_size,
             " (--nproc-per-node ", p.nproc_per_node(), " * --nnodes ", p.nnodes(),
             ", or WORLD_SIZE/SLURM_NTASKS): choose TP * ", d.cp > 1 ? "CP * " : "",
             "PP dividing the number of ranks, or run a multiple of ", d.tp * d.cp * d.pp,
             " ranks");
  }
  CheckContextParallel(c, d, out);
  CheckPipelineSplit(c, d, CheckVirtualPipeline(c, d, out), out);
}

// --train-samples, Megatron's other way to say how long to train: whole global batches
// (after --rampup-batch-size's steps), and --train-iters unset (or 0, which clears a
// --config file's) or agreeing.
void CheckTrainSamples(const TrainingConfig& t, int64_t global_batch, int64_t seq_length,
                       Problems* out) {
  const BatchRampup rampup(t, global_batch, seq_length);
  const int64_t iterations = rampup.TrainIters(t.train_samples());
  if (iterations <= 0) {
    const int64_t first = rampup.GlobalBatchAt(0);
    out->Add("--train-samples ", t.train_samples(), " is less than one global batch (", first,
             " samples", rampup.ramps() ? ", the ramp's first" : "", "): train on at least ", first,
             " samples");
  } else if (iterations > kInt32Max) {
    out->Add("--train-samples ", t.train_samples(), " / global batch ", global_batch,
             " overflows --train-iters (int32): use a larger global batch");
  } else if (t.has_train_iters() && t.train_iters() != 0 && t.train_iters() != iterations) {
    out->Add("--train-iters ", t.train_iters(), " and --train-samples ", t.train_samples(),
             " contradict: ", t.train_samples(), " samples / global batch ", global_batch, " = ",
             iterations,
             " iterations; set only one of them (--train-iters 0 clears a --config file's)");
  }
}

void CheckBatch(const Config& c, const Derived& d, Problems* out) {
  const TrainingConfig& t = c.training();
  out->Positive("--micro-batch-size", t.micro_batch_size());
  out->NonNegative("--global-batch-size", t.global_batch_size());
  out->NonNegative("--num-micro-batches", t.num_micro_batches());
  out->NonNegative("--train-samples", t.train_samples());
  if (t.train_samples() <= 0) out->Positive("--train-iters", t.train_iters());
  if (d.dp <= 0 || t.micro_batch_size() <= 0) {
    // The ramp's own numbers, without the layout's micro-batch size.
    for (const std::string& problem : RampupProblems(t, t.global_batch_size(), 0)) {
      out->Add(problem);
    }
    for (const std::string& problem : StepBatchScheduleProblems(c, 0)) out->Add(problem);
    return;
  }
  const int64_t per_micro = int64_t{t.micro_batch_size()} * d.dp;
  const std::string dp_text =
      absl::StrCat("DP ", d.dp, " (world size / (TP ", d.tp, d.cp > 1 ? absl::StrCat(" * CP ", d.cp) : "", " * PP ", d.pp, "))");
  if (t.global_batch_size() > 0 && t.global_batch_size() % per_micro != 0) {
    out->Add("--global-batch-size ", t.global_batch_size(),
             " is not divisible by --micro-batch-size ", t.micro_batch_size(), " * ", dp_text,
             " = ", per_micro, ": choose a global batch that is a multiple of ", per_micro);
  } else if (t.global_batch_size() > 0 && t.num_micro_batches() > 0 &&
             t.num_micro_batches() * per_micro != t.global_batch_size()) {
    out->Add("--global-batch-size ", t.global_batch_size(), ", --num-micro-batches ",
             t.num_micro_batches(), " and --micro-batch-size ", t.micro_batch_size(),
             " contradict: ", t.num_micro_batches(), " * ", t.micro_batch_size(), " * ", dp_text,
             " = ", t.num_micro_batches() * per_micro, ", not ", t.global_batch_size(),
             ": set only one of --global-batch-size and --num-micro-batches");
  } else if (t.global_batch_size() == 0 &&
             std::max(1, t.num_micro_batches()) * per_micro > kInt32Max) {
    out->Add("--num-micro-batches ", t.num_micro_batches(), " * --micro-batch-size ",
             t.micro_batch_size(), " * ", dp_text,
             " overflows --global-batch-size (int32): use fewer or smaller micro-batches");
  } else {
    const int64_t global_batch = t.global_batch_size() > 0
                                     ? t.global_batch_size()
                                     : std::max(1, t.num_micro_batches()) * per_micro;
    for (const std::string& problem : RampupProblems(t, global_batch, per_micro)) {
      out->Add(problem);
    }
    for (const std::string& problem : StepBatchScheduleProblems(c, per_micro)) out->Add(problem);
    if (t.train_samples() > 0) CheckTrainSamples(t, global_batch, c.model().seq_length(), out);
  }
}

// Warmup is part of the decay schedule: --lr-warmup-<unit> may not exceed --lr-decay-<unit>,
// whose 0 means the run's length (`length_flag`).
void CheckWarmupWithinDecay(const char* unit, int64_t warmup, int64_t decay_flag,
                            const char* length_flag, int64_t length, Problems* out) {
  const int64_t decay = decay_flag > 0 ? decay_flag : length;
  if (warmup <= 0 || decay <= 0 || warmup <= decay) return;
  out->Add("--lr-warmup-", unit, " ", warmup, " exceeds --lr-decay-", unit,
           decay_flag > 0 ? std::string(" ") : absl::StrCat(" (= ", length_flag, ") "), decay,
           ": warmup is part of the decay schedule; set --lr-warmup-", unit, " <= ", decay);
}

// The schedule's warmup and decay, in iterations, or in samples under --train-samples
// (Megatron's rule: the schedule counts what the run counts).
void CheckScheduleLength(const Config& c, Problems* out) {
  const OptimizerConfig& o = c.optimizer();
  out->NonNegative("--lr-warmup-samples", o.lr_warmup_samples());
  out->NonNegative("--lr-decay-samples", o.lr_decay_samples());
  const int64_t train_samples = c.training().train_samples();
  if (train_samples <= 0) {
    if (o.lr_warmup_samples() > 0 || o.lr_decay_samples() > 0) {
      out->Add(o.lr_warmup_samples() > 0 ? "--lr-warmup-samples" : "--lr-decay-samples",
               " needs --train-samples: without it the schedule counts iterations; use "
               "--lr-warmup-iters / --lr-decay-iters");
    }
    CheckWarmupWithinDecay("iters", o.lr_warmup_iters(), o.lr_decay_iters(), "--train-iters",
                           c.training().train_iters(), out);
    return;
  }
  if (o.lr_warmup_iters() > 0 || o.lr_decay_iters() > 0) {
    out->Add(o.lr_warmup_iters() > 0 ? "--lr-warmup-iters" : "--lr-decay-iters",
             " counts iterations, but with --train-samples the schedule counts samples: use "
             "--lr-warmup-samples / --lr-decay-samples (0 clears a --config file's iterations)");
  }
  if (o.lr_warmup_samples() > 0 && o.lr_warmup_fraction() > 0) {
    out->Add("--lr-warmup-samples ", o.lr_warmup_samples(), " and --lr-warmup-fraction ",
             o.lr_warmup_fraction(), " are exclusive: set only one of them");
  }
  CheckWarmupWithinDecay("samples", o.lr_warmup_samples(), o.lr_decay_samples(), "--train-samples",
                         train_samples, out);
}

void CheckOptimizer(const Config& c, Problems* out) {
  const OptimizerConfig& o = c.optimizer();
  out->NonNegativeReal("--lr", o.lr());
  out->NonNegativeReal("--min-lr", o.min_lr());
  if (o.min_lr() > o.lr()) {
    out->Add("--min-lr ", o.min_lr(), " is larger than --lr ", o.lr(),
             ": the schedule decays from lr down to min-lr; set --min-lr <= --lr");
  }
  out->NonNegativeReal("--lr-warmup-init", o.lr_warmup_init());
  out->NonNegative("--lr-warmup-iters", o.lr_warmup_iters());
  out->NonNegative("--lr-decay-iters", o.lr_decay_iters());
  if (!(o.lr_warmup_fraction() >= 0 && o.lr_warmup_fraction() <= 1)) {
    out->Add("--lr-warmup-fraction ", o.lr_warmup_fraction(),
             " must be in [0, 1]: it is a fraction of --lr-decay-iters");
  }
  if (o.lr_warmup_iters() > 0 && o.lr_warmup_fraction() > 0) {
    out->Add("--lr-warmup-iters ", o.lr_warmup_iters(), " and --lr-warmup-fraction ",
             o.lr_warmup_fraction(), " are exclusive: set only one of them");
  }
  CheckScheduleLength(c, out);
  for (const std::string& line : WsdAndDecoupledLrProblems(c)) out->Add(line);
  out->NonNegativeReal("--clip-grad", o.clip_grad());
  out->NonNegativeReal("--weight-decay", o.weight_decay());
  out->HalfOpenUnit("--adam-beta1", o.adam_beta1());
  out->HalfOpenUnit("--adam-beta2", o.adam_beta2());
  out->PositiveReal("--adam-eps", o.adam_eps());
  out->HalfOpenUnit("--sgd-momentum", o.sgd_momentum());
}

void CheckRecompute(const Config& c, Problems* out) {
  const RecomputeConfig& r = c.recompute();
  out->NonNegative("--recompute-num-layers", r.recompute_num_layers());
  if (r.recompute_activations() &&
      ParseChoice<RecomputeGranularity>(r.recompute_granularity()) == RecomputeGranularity::kFull) {
    out->Add(
        "--recompute-activations and --recompute-granularity full contradict: "
        "--recompute-activations means selective; drop one of them");
    return;
  }
  // Unset for a string that is no choice (CheckChoices reports it).
  const std::optional<RecomputeGranularity> granularity =
      r.recompute_activations() ? RecomputeGranularity::kSelective
                                : ParseChoice<RecomputeGranularity>(r.recompute_granularity());
  const bool has_method = !r.recompute_method().empty();
  const bool has_layers = r.recompute_num_layers() != 0;
  if (granularity == RecomputeGranularity::kFull) {
    if (!has_method) {
      out->Add(
          "--recompute-method is missing: --recompute-granularity full needs "
          "--recompute-method uniform or block");
    }
    if (r.recompute_num_layers() <= 0) {
      out->Add("--recompute-num-layers ", r.recompute_num_layers(),
               " must be positive with --recompute-granularity full: set the layers per "
               "recompute unit (uniform) or per stage (block)");
    } else if (r.recompute_num_layers() > c.model().num_layers()) {
      out->Add("--recompute-num-layers ", r.recompute_num_layers(), " exceeds --num-layers ",
               c.model().num_layers(), ": set at most the number of layers");
    }
    if (r.recompute_modules_size() > 0) {
      out->Add(
          "--recompute-modules only applies to --recompute-granularity selective: full "
          "recomputes whole layers; drop --recompute-modules");
    }
  } else if (granularity == RecomputeGranularity::kSelective) {
    if (has_method || has_layers) {
      out->Add(has_method ? "--recompute-method" : "--recompute-num-layers",
               " is for --recompute-granularity full: selective recomputation takes neither "
               "--recompute-method nor --recompute-num-layers; drop them");
    }
  } else if (granularity == RecomputeGranularity::kNone) {
    if (has_method || has_layers) {
      out->Add(has_method ? "--recompute-method" : "--recompute-num-layers",
               " has no effect without --recompute-granularity full: add it or drop the flag");
    }
    if (r.recompute_modules_size() > 0) {
      out->Add(
          "--recompute-modules has no effect without --recompute-granularity selective "
          "(or --recompute-activations): add it or drop the flag");
    }
  }
  static const char* const kModules[] = {"core_attn", "mlp", "layernorm"};
  for (const std::string& module : r.recompute_modules()) {
    if (std::find(std::begin(kModules), std::end(kModules), module) == std::end(kModules)) {
      out->Add("--recompute-modules '", module,
               "' is not a module Conveyor can recompute: use core_attn, mlp or layernorm");
    }
  }
}

// Megatron's blends: either only prefixes, or weight/prefix pairs "0.3 a 0.7 b".
// The blend's own parser (data/blend), so that validation and the data loader agree.
void CheckBlend(const char* flag, const google::protobuf::RepeatedPtrField<std::string>& paths,
                Problems* out) {
  if (paths.empty()) return;
  const absl::StatusOr<Blend> blend =
      ParseBlend(std::vector<std::string>(paths.begin(), paths.end()), flag);
  if (!blend.ok()) out->Add(blend.status().message());
}

void CheckData(const Config& c, Problems* out) {
  const DataConfig& data = c.data();
  const bool blend = data.data_path_size() > 0;
  const bool separate = data.train_data_path_size() > 0 || data.valid_data_path_size() > 0 ||
                        data.test_data_path_size() > 0;
  if (data.mock_data() && (blend || separate)) {
    out->Add("--mock-data and ",
             blend ? "--data-path" : "--train-data-path/--valid-data-path/--test-data-path",
             " are exclusive: mock data reads no files; drop one of them (--mock-data=false "
             "clears a --config file's mock_data)");
  } else if (blend && separate) {
    out->Add(
        "--data-path and --train-data-path/--valid-data-path/--test-data-path are "
        "exclusive: --data-path is divided by --split; use one way of naming the data");
  } else if (!data.mock_data() && !blend && !separate) {
    out->Add(
        "--mock-data, --data-path or --train-data-path: no data source is set; pass one "
        "(--mock-data for synthetic tokens)");
  } else if (separate && data.train_data_path_size() == 0) {
    out->Add(
        "--train-data-path is missing: --valid-data-path/--test-data-path need a "
        "training set too");
  }
  CheckBlend("--data-path", data.data_path(), out);
  CheckBlend("--train-data-path", data.train_data_path(), out);
  CheckBlend("--valid-data-path", data.valid_data_path(), out);
  CheckBlend("--test-data-path", data.test_data_path(), out);
  if (blend) {
    const std::vector<std::string> parts = absl::StrSplit(data.split(), absl::ByAnyChar(",/"));
    double sum = 0;
    bool ok = parts.size() <= 3;
    for (const std::string& part : parts) {
      double v;
      ok = ok && absl::SimpleAtod(part, &v) && v >= 0 && std::isfinite(v);
      if (ok) sum += v;
    }
    if (!ok || !(sum > 0)) {
      out->Add("--split '", data.split(),
               "' must be up to three non-negative numbers with a "
               "positive sum, as in --split 969,30,1 (train,valid,test)");
    }
  }
  out->Positive("--eval-interval", data.eval_interval());
  out->NonNegative("--eval-iters", data.eval_iters());
  // Without a tokenizer that fixes the vocabulary, nothing else sizes the embedding.
  const std::string tokenizer = EffectiveTokenizerType(data);
  if ((tokenizer.empty() || tokenizer == "NullTokenizer") && c.model().vocab_size() <= 0) {
    out->Add("--vocab-size ", c.model().vocab_size(), " must be positive with ",
             tokenizer.empty() ? "no --tokenizer-type" : "--tokenizer-type NullTokenizer",
             data.mock_data() ? " and --mock-data" : "",
             ": nothing else fixes the vocabulary; set e.g. --vocab-size 50257");
  }
  if (tokenizer == "GPT2BPETokenizer") {
    const char* why = data.tokenizer_type().empty()
                          ? "without --tokenizer-type, the tokenizer is Megatron's default "
                            "GPT2BPETokenizer, which"
                          : "--tokenizer-type GPT2BPETokenizer";
    if (data.vocab_file().empty()) out->Add("--vocab-file is missing: ", why, " needs vocab.json");
    if (data.merge_file().empty()) out->Add("--merge-file is missing: ", why, " needs merges.txt");
  }
}

void CheckCheckpoint(const Config& c, Problems* out) {
  const CheckpointConfig& k = c.checkpoint();
  out->NonNegative("--save-interval", k.save_interval());
  out->NonNegative("--ckpt-step", k.ckpt_step());
  out->NonNegative("--exit-interval", k.exit_interval());
  out->NonNegative("--exit-duration-in-mins", k.exit_duration_in_mins());
  // --save-interval without --save is tolerated, as Megatron tolerates it (its recipes
  // set the interval and leave --save to the launch); the run says nothing is saved.
  if (k.save().empty()) {
    if (k.async_save()) out->Add("--async-save needs --save FOLDER: nothing would be saved");
    if (k.overwrite_save()) {
      out->Add("--overwrite-save needs --save FOLDER: there is nothing to overwrite");
    }
  }
  if (k.load().empty()) {
    if (k.ckpt_step() > 0) {
      out->Add("--ckpt-step ", k.ckpt_step(), " needs --load FOLDER to load that step from");
    }
    if (k.finetune()) out->Add("--finetune needs --load FOLDER with the weights to start from");
    if (k.exit_on_missing_checkpoint()) {
      out->Add("--exit-on-missing-checkpoint needs --load FOLDER: there is nothing to miss");
    }
  }
}

// Generic: every string field with (choices), since a --config file bypasses the
// parser's check.
void CheckChoices(const Config& c, Problems* out) {
  for (const FlagField& f : AllFlagFields()) {
    if (f.field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
    const std::vector<std::string> choices = FieldChoices(*f.field);
    if (choices.empty()) continue;
    const Message& group = c.GetReflection()->GetMessage(c, f.group);
    const Reflection& r = *group.GetReflection();
    std::vector<std::string> values;
    if (f.field->is_repeated()) {
      for (int i = 0; i < r.FieldSize(group, f.field); ++i) {
        values.push_back(r.GetRepeatedString(group, f.field, i));
      }
    } else {
      values.push_back(r.GetString(group, f.field));
    }
    for (const std::string& v : values) {
      if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
        out->Add(FlagName(*f.field), " '", v, "' is not one of ", DescribeChoices(choices),
                 ": pick one of them");
      }
    }
  }
}

// An unset or malformed variable; malformed ones give 0 so validation reports them.
bool ReadPositiveEnv(const EnvLookup& getenv_fn, const char* name, int* out) {
  const char* text = getenv_fn(name);
  if (text == nullptr || *text == '\0') return false;
  int value = 0;
  *out = absl::SimpleAtoi(text, &value) && value > 0 ? value : 0;
  return true;
}

// --profile: a non-empty window of iterations, ranks of the job.
void CheckProfile(const LoggingConfig& l, int world_size, Problems* out) {
  if (!l.profile()) return;
  out->NonNegative("--profile-step-start", l.profile_step_start());
  if (l.profile_step_end() <= l.profile_step_start()) {
    out->Add("--profile-step-end ", l.profile_step_end(), " must exceed --profile-step-start ",
             l.profile_step_start(),
             ": the profile covers the iterations after the start up to the end; raise "
             "--profile-step-end");
  }
  for (int rank : l.profile_ranks()) {
    if (rank < 0 || rank >= world_size) {
      out->Add("--profile-ranks ", rank, " is not a rank of the world of ", world_size,
               ": give ranks in [0, ", world_size, ")");
    }
  }
  if (l.profile_file().empty()) out->Add("--profile needs --profile-file FILE");
}

}  // namespace

int WorldSizeFromEnvironment(const Config& config, const EnvLookup& getenv_fn) {
  // A launcher's world of one (srun -n1, a one-task allocation) leaves the ranks to
  // --nproc-per-node, as torchrun under srun -n1 would fork them.
  int world = 0;
  for (const char* name : {"WORLD_SIZE", "SLURM_NTASKS"}) {
    if (ReadPositiveEnv(getenv_fn, name, &world) && world != 1) return world;  // 0: malformed
  }
  const int64_t product = int64_t{config.parallel().nproc_per_node()} * config.parallel().nnodes();
  return product > 0 && product <= kInt32Max ? static_cast<int>(product) : 0;
}

int WorldSizeFromEnvironment(const Config& config) {
  return WorldSizeFromEnvironment(config, [](const char* name) { return std::getenv(name); });
}

std::vector<std::string> ValidateConfig(const Config& config, int world_size) {
  const Derived d = Derive(config, world_size);
  // Sizes first, and alone when one is beyond its limit: the rules below build
  // structures per layer, per pattern entry and per micro-batch.
  std::vector<std::string> sizes = SizeLimitProblems(config, d.dp);
  if (!sizes.empty()) return sizes;
  Problems problems;
  CheckModel(config, d, &problems);
  CheckParallel(config, d, world_size, &problems);
  CheckBatch(config, d, &problems);
  CheckOptimizer(config, &problems);
  CheckRecompute(config, &problems);
  CheckData(config, &problems);
  CheckCheckpoint(config, &problems);
  problems.Positive("--log-interval", config.logging().log_interval());
  problems.Positive("--tensorboard-log-interval", config.logging().tensorboard_log_interval());
  problems.Positive("--tensorboard-queue-size", config.logging().tensorboard_queue_size());
  if (!config.logging().plan_html().empty() && !config.training().dry_run()) {
    problems.Add("--plan-html is written by --dry-run: add --dry-run (training writes no page)");
  }
  CheckProfile(config.logging(), world_size, &problems);
  if (config.precision().fp16()) {
    problems.Add(
        "--fp16 is not supported: fp16 training needs loss scaling, which Conveyor does not "
        "implement; use --bf16 (same memory and speed, no loss scaling needed)");
  }
  CheckChoices(config, &problems);
  for (const std::string& line : MoeProblems(config)) problems.Add(line);
  for (const std::string& line : MtpProblems(config)) problems.Add(line);
  for (const std::string& line : MlaProblems(config)) problems.Add(line);
  for (const std::string& line : AttentionPositionProblems(config)) problems.Add(line);
  for (const std::string& line : ExpertParallelProblems(config, world_size)) {
    problems.Add(line);
  }
  return problems.Take();
}

namespace {

// ResolveConfig's parts, each filling in one group's derived ("auto") values.
void ResolveModel(const Derived& d, ModelConfig* m) {
  m->set_ffn_hidden_size(static_cast<int32_t>(d.ffn));
  m->set_num_query_groups(static_cast<int32_t>(d.query_groups));
  m->set_kv_channels(static_cast<int32_t>(d.kv_channels));
  if (m->max_position_embeddings() == 0) m->set_max_position_embeddings(m->seq_length());
  if (m->moe_ffn_hidden_size() == 0) m->set_moe_ffn_hidden_size(static_cast<int32_t>(d.ffn));
}

void ResolveParallel(const Derived& d, ParallelConfig* p) {
  if (p->num_layers_per_virtual_pipeline_stage() > 0) {
    // Megatron's two spellings of V; keep one so the result validates again.
    p->set_num_virtual_stages_per_pipeline_rank(
        static_cast<int32_t>(d.split_layers / d.pp / p->num_layers_per_virtual_pipeline_stage()));
    p->set_num_layers_per_virtual_pipeline_stage(0);
  } else if (p->num_virtual_stages_per_pipeline_rank() == 0) {
    p->set_num_virtual_stages_per_pipeline_rank(1);
  }
  if (p->pipeline_schedule().empty()) {
    p->set_pipeline_schedule(p->num_virtual_stages_per_pipeline_rank() > 1 ? "interleaved-1f1b"
                                                                           : "1f1b");
  }
  if (p->expert_tensor_parallel_size() == 0) {  // Megatron's default: the experts use TP
    p->set_expert_tensor_parallel_size(p->tensor_model_parallel_size());
  }
}

void ResolveBatchAndSchedule(const Derived& d, int64_t seq_length, TrainingConfig* t,
                             OptimizerConfig* o) {
  const int64_t per_micro = int64_t{t->micro_batch_size()} * d.dp;
  if (!t->step_batch_size_schedule().empty()) {
    // Megatron's global batch under --step-batch-size-schedule: its last entry's.
    t->set_global_batch_size(
        static_cast<int32_t>(BatchRampup(*t, 0, seq_length).final_batch()));
  }
  if (t->global_batch_size() > 0) {
    t->set_num_micro_batches(static_cast<int32_t>(t->global_batch_size() / per_micro));
  } else {
    t->set_num_micro_batches(std::max(1, t->num_micro_batches()));
    t->set_global_batch_size(static_cast<int32_t>(t->num_micro_batches() * per_micro));
  }
  if (t->train_samples() > 0) {
    // Megatron: train-iters = train-samples // global batch (after the ramp's steps); the
    // schedule counts samples.
    t->set_train_iters(static_cast<int32_t>(BatchRampup(*t, t->global_batch_size(), seq_length).TrainIters(t->train_samples())));
    if (o->lr_decay_samples() == 0) o->set_lr_decay_samples(t->train_samples());
  } else if (o->lr_decay_iters() == 0) {
    o->set_lr_decay_iters(t->train_iters());
  }
  if (o->lr_warmup_fraction() > 0) {
    // Megatron: warmup = fraction * decay (iterations or samples). Clear the fraction so
    // the resolved config does not set both exclusive flags.
    if (t->train_samples() > 0) {
      o->set_lr_warmup_samples(static_cast<int64_t>(o->lr_warmup_fraction() *
                                                    static_cast<double>(o->lr_decay_samples())));
    } else {
      o->set_lr_warmup_iters(static_cast<int32_t>(o->lr_warmup_fraction() * o->lr_decay_iters()));
    }
    o->set_lr_warmup_fraction(0);
  }
}

void ResolveRecompute(RecomputeConfig* r) {
  if (r->recompute_activations()) {
    r->set_recompute_granularity(std::string(ChoiceName(RecomputeGranularity::kSelective)));
  }
  if (ParseChoice<RecomputeGranularity>(r->recompute_granularity()) ==
          RecomputeGranularity::kSelective &&
      r->recompute_modules_size() == 0) {
    r->add_recompute_modules("core_attn");  // Megatron's default module list
  }
}

// The schedule's own rules on V and M (zbv runs two chunks per rank, interleaving needs
// M divisible by P, ...) through its generator: rank 0's list (it is built from every
// rank's order) for the micro-batches a plan simulates, which keep M's rules without a
// list of billions of actions for a huge global batch.
absl::Status CheckScheduleRules(const ParallelConfig& p, int pp, int64_t micro_batches) {
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(p.pipeline_schedule()));
  const int simulated = pipeline::SimulatedMicroBatches(pp, static_cast<int>(micro_batches));
  const absl::StatusOr<std::vector<pipeline::Action>> actions =
      schedule.actions(pp, p.num_virtual_stages_per_pipeline_rank(), simulated, /*rank=*/0);
  if (actions.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      actions.status().message(),
      simulated < micro_batches ? absl::StrCat(" (checked on ", simulated,
                                               " micro-batches, which have the remainder of M = ",
                                               micro_batches, " modulo P)")
                                : ""));
}

}  // namespace

absl::StatusOr<Config> ResolveConfig(const Config& config, int world_size) {
  const std::vector<std::string> problems = ValidateConfig(config, world_size);
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  const Derived d = Derive(config, world_size);
  Config out = config;
  ResolveModel(d, out.mutable_model());
  ResolveParallel(d, out.mutable_parallel());
  ResolveBatchAndSchedule(d, out.model().seq_length(), out.mutable_training(),
                          out.mutable_optimizer());
  // bf16 is how a GPU trains unless asked otherwise (--bf16=false); the CPU stays fp32.
  if (!out.precision().has_bf16() &&
      ParseChoice<DeviceKind>(out.parallel().device()) == DeviceKind::kCuda) {
    out.mutable_precision()->set_bf16(true);
  }
  ResolveRecompute(out.mutable_recompute());
  out.mutable_data()->set_tokenizer_type(EffectiveTokenizerType(out.data()));

  // The schedule's rules, checked with the flags rather than once the ranks have started.
  const ParallelConfig& p = out.parallel();
  const absl::Status rules =
      CheckScheduleRules(p, static_cast<int>(d.pp), out.training().num_micro_batches());
  if (!rules.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline-schedule ", p.pipeline_schedule(), ": ", rules.message()));
  }
  // So are the smaller micro-batch counts of --rampup-batch-size's steps (GPT-3's ramp
  // has 95 counts), each count once per list the rules are checked on.
  std::map<int, int64_t> ramp_micro_batches;  // simulated count -> the first step's
  for (const RampStage& stage : BatchRampup(out).RunStages(out.training())) {
    const int64_t micro_batches = stage.batch / (int64_t{out.training().micro_batch_size()} * d.dp);
    ramp_micro_batches.insert(
        {pipeline::SimulatedMicroBatches(static_cast<int>(d.pp), static_cast<int>(micro_batches)),
         micro_batches});
  }
  for (const auto& [simulated, micro_batches] : ramp_micro_batches) {
    const absl::Status ramp_rules = CheckScheduleRules(p, static_cast<int>(d.pp), micro_batches);
    if (!ramp_rules.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pipeline-schedule ", p.pipeline_schedule(), ": ", ramp_rules.message(),
          " (at a global batch of --rampup-batch-size with ", micro_batches,
          " micro-batches): choose START and INCREMENT so that every step's micro-batch count "
          "suits the schedule"));
    }
  }
  return out;
}

int64_t PaddedVocabSize(const Config& config) {
  const int64_t vocab = config.model().vocab_size();
  const int64_t multiple = int64_t{config.model().make_vocab_size_divisible_by()} *
                           std::max(1, config.parallel().tensor_model_parallel_size());
  if (vocab <= 0 || multiple <= 0) return vocab;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace conveyor
