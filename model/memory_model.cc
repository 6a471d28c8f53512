#include "model/memory_model.h"

#include <algorithm>

#include "absl/types/span.h"
#include "base/status_macros.h"
#include "model/layer_stash.h"
#include "model/pipeline_split.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/schedule.h"
#include "proto/config_choices.h"

namespace conveyor {
namespace {

constexpr int64_t kFloat = 4;

struct Sizes {
  int64_t tokens;         // T: the micro-batch's tokens
  int64_t local_tokens;   // outside the TP region (T / TP under SP)
  int64_t heads;          // held by this TP rank
  int64_t qkv, fc1, ffn;  // local widths
};

Sizes SizesOf(const ModelShape& s, const ActivationShape& a) {
  Sizes z;
  z.tokens = a.micro_batch * a.seq;
  z.local_tokens = a.sequence_parallel ? z.tokens / a.tp : z.tokens;
  z.heads = s.heads / a.tp;
  z.qkv = s.qkv_width() / a.tp;
  z.fc1 = s.fc1_width() / a.tp;
  z.ffn = s.ffn_hidden / a.tp;
  return z;
}

// What attention keeps for its backward: fp32 probabilities, or (fused) each row's fp32
// log-sum-exp.
int64_t AttentionSavedBytes(const Sizes& z, const ActivationShape& a) {
  const int64_t rows = a.micro_batch * z.heads * a.seq;
  return kFloat * (a.fused_attention ? rows : rows * a.seq);
}

// Two norms' mean and rstd per local token, fp32.
int64_t NormStatsBytes(const Sizes& z) { return kFloat * 4 * z.local_tokens; }

int64_t StashTensorBytes(const StashTensor& t, const ModelShape& s, const ActivationShape& a,
                         const Sizes& z) {
  int64_t columns = 0;
  switch (t.columns) {
    case StashColumns::kAttention:
      return AttentionSavedBytes(z, a);
    case StashColumns::kHidden:
      columns = s.hidden;
      break;
    case StashColumns::kQkv:
      columns = z.qkv;
      break;
    case StashColumns::kContext:
      columns = z.heads * s.head_dim;
      break;
    case StashColumns::kFc1:
      columns = z.fc1;
      break;
    case StashColumns::kFfn:
      columns = z.ffn;
      break;
  }
  return a.bytes * (t.rows == StashRows::kShard ? z.local_tokens : z.tokens) * columns;
}

// Bytes of the tensors of `list` that `held` says are held: a gathered tensor counts
// only under SP when its shard is held too (without SP they are one tensor).
template <typename Held>
int64_t HeldBytes(absl::Span<const StashTensor> list, const ModelShape& s, const ActivationShape& a,
                  const Held& held) {
  const Sizes z = SizesOf(s, a);
  int64_t bytes = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!held(list[i])) continue;
    if (list[i].rows == StashRows::kGathered && !a.sequence_parallel && held(list[i - 1])) {
      continue;
    }
    bytes += StashTensorBytes(list[i], s, a, z);
  }
  return bytes;
}

// The weights GEMMs read (a bf16 copy each under --bf16): qkv, proj, fc1, fc2.
int64_t LayerGemmWeights(const ModelShape& s, int tp) {
  return (s.qkv_width() / tp + s.fc1_width() / tp) * s.hidden +
         s.hidden * (s.heads * s.head_dim / tp + s.ffn_hidden / tp);
}

int64_t LayerParameters(const ModelShape& s, int tp) {
  const int64_t norm = s.rms_norm ? s.hidden : 2 * s.hidden;
  const int64_t bias = s.linear_bias ? 1 : 0;
  const int64_t qkv = s.qkv_width() / tp, fc1 = s.fc1_width() / tp;
  const int64_t attn_out = s.heads * s.head_dim / tp, ffn = s.ffn_hidden / tp;
  return 2 * norm + qkv * (s.hidden + bias) + s.hidden * attn_out + bias * s.hidden +
         fc1 * (s.hidden + bias) + s.hidden * ffn + bias * s.hidden;
}

}  // namespace

int64_t LayerStashBytes(const ModelShape& s, const ActivationShape& a,
                        const SelectiveRecompute& selective, bool full_recompute,
                        bool keeps_checkpoint) {
  const Sizes z = SizesOf(s, a);
  if (full_recompute) return keeps_checkpoint ? a.bytes * z.local_tokens * s.hidden : 0;
  return HeldBytes(kForwardStash, s, a,
                   [&](const StashTensor& t) { return !DroppedAfterForward(t, selective); }) +
         NormStatsBytes(z);
}

int64_t LayerAwaitingWeightBytes(const ModelShape& s, const ActivationShape& a) {
  const auto kept = [](const StashTensor& t) { return t.kept_for_weight; };
  return HeldBytes(kForwardStash, s, a, kept) + HeldBytes(kWeightGradientStash, s, a, kept) +
         NormStatsBytes(SizesOf(s, a));
}

int64_t HeadStashBytes(const ModelShape& s, const ActivationShape& a) {
  const Sizes z = SizesOf(s, a);
  const int64_t vocab = s.padded_vocab / a.tp;
  // Final norm input and gathered output, logits; the fp32 log-sum-exps and norm
  // statistics.
  return a.bytes * (z.local_tokens * s.hidden + z.tokens * s.hidden + z.tokens * vocab) +
         kFloat * (z.tokens + 2 * z.local_tokens);
}

int64_t LayerBackwardWorkingBytes(const ModelShape& s, const ActivationShape& a) {
  const Sizes z = SizesOf(s, a);
  const int64_t full = z.tokens * s.hidden, local = z.local_tokens * s.hidden;
  // Everything alive at the end of one layer's BackwardInput: the incoming gradient,
  // the gradients kept for W, the temporaries, and the outgoing gradient. The gradient
  // of the MLP's activation is gone by then (it lives only inside fc2's backward through
  // GELU, or SwiGLU's block), and while it lived, less was held than here.
  const int64_t gathered = a.sequence_parallel ? 2 * full : 0;  // d_fc2_full, d_proj_full
  return a.bytes *
         (local /* dy */ + local /* d_fc2 */ + z.tokens * z.fc1 /* d_fc1 */ + local /* d_ln2 */ +
          local /* d_x1 */ + local /* d_proj */ + z.tokens * z.heads * s.head_dim /* d_ctx */ +
          z.tokens * z.qkv /* d_qkv */ + local /* d_ln1 */ + local /* dx */ + gathered);
}

absl::StatusOr<std::vector<RankMemory>> PredictMemory(const Config& config, const ModelShape& shape,
                                                      const pipeline::Timeline& timeline,
                                                      int data_parallel_size) {
  const ParallelConfig& p = config.parallel();
  const int tp = p.tensor_model_parallel_size();
  const int P = p.pipeline_model_parallel_size();
  const int V = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  const int dp = std::max(1, data_parallel_size);
  ASSIGN_OR_RETURN(const std::vector<int64_t> layers, LayersPerStage(config));
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(p.pipeline_schedule()));
  const bool bf16 = config.precision().bf16();
  const ActivationShape a{config.training().micro_batch_size(),
                          shape.seq,
                          tp,
                          p.sequence_parallel() && tp > 1,
                          bf16 ? 2 : kFloat,
                          ParseChoice<DeviceKind>(p.device()) == DeviceKind::kCuda};
  const RecomputePolicy recompute = RecomputePolicyFromConfig(config);
  const bool adam =
      ParseChoice<OptimizerKind>(config.optimizer().optimizer()) == OptimizerKind::kAdam;
  const bool deferred_weights = schedule.name.rfind("zb", 0) == 0;  // zb-h1, zb-h2, zbv
  const int64_t full_layer = LayerStashBytes(shape, a, {}, false, false);
  const int64_t vocab_rows = shape.padded_vocab / tp;
  if (static_cast<int>(timeline.ranks.size()) != P) {
    return absl::InvalidArgumentError("PredictMemory: the schedule's timeline needs P ranks");
  }

  std::vector<RankMemory> ranks;
  for (int r = 0; r < P; ++r) {
    RankMemory m;
    m.pipeline_rank = r;
    std::vector<int64_t> chunk_stash_bytes(V, 0);
    int64_t gemm_weights = 0;
    for (int c = 0; c < V; ++c) {
      const int stage = pipeline::GlobalStage(schedule.layout, P, r, c);
      const bool first = stage == 0, last = stage == P * V - 1;
      int64_t chunk_stash = 0;
      for (int64_t i = 0; i < layers[stage]; ++i) {
        m.parameters += LayerParameters(shape, tp);
        gemm_weights += LayerGemmWeights(shape, tp);
        int64_t layer = LayerStashBytes(shape, a, recompute.selective, recompute.Recomputes(i),
                                        recompute.KeepsCheckpoint(i));
        if (deferred_weights) layer = std::max(layer, LayerAwaitingWeightBytes(shape, a));
        chunk_stash += layer;
      }
      if (first) {
        m.parameters += vocab_rows * shape.hidden;
        if (!shape.rope) m.parameters += shape.max_positions * shape.hidden;
      }
      if (last) {
        m.parameters += shape.rms_norm ? shape.hidden : 2 * shape.hidden;
        // Untied: the output layer; tied on another stage: the head's embedding copy.
        if (!shape.tied_embeddings || !first) m.parameters += vocab_rows * shape.hidden;
        gemm_weights += vocab_rows * shape.hidden;  // the output layer, or the tied embedding
        chunk_stash += HeadStashBytes(shape, a);
      }
      m.stash_bytes_per_micro_batch += chunk_stash;
      chunk_stash_bytes[c] = chunk_stash;
    }
    m.weight_bytes = kFloat * m.parameters + (bf16 ? 2 * gemm_weights : 0);
    m.grad_bytes = kFloat * m.parameters;
    const int64_t state = (adam ? 2 : 1) * kFloat;  // AdamW: two moments; SGD: momentum
    if (p.use_distributed_optimizer()) {
      const int64_t shard = (m.parameters + dp - 1) / dp;
      m.grad_bytes += kFloat * (shard * dp + shard);       // flat buffer and shard gradient
      m.optimizer_bytes = state * shard + kFloat * shard;  // state and master copy
    } else {
      if (dp > 1) m.grad_bytes += kFloat * m.parameters;  // DP buckets
      m.optimizer_bytes = state * m.parameters;
    }
    // Walk the rank's schedule: a (micro-batch, chunk) holds its chunk's stash from its
    // F until its W (or fused backward); the peak of the sum, then one layer's
    // backward working set.
    int64_t held = 0, peak = 0;
    int count = 0;
    for (const pipeline::TimedAction& t : timeline.ranks[r]) {
      const pipeline::ActionType type = t.action.type;
      if (type == pipeline::ActionType::kForward) {
        held += chunk_stash_bytes[t.action.chunk];
        peak = std::max(peak, held);
        m.peak_stashed = std::max(m.peak_stashed, ++count);
      } else if (type == pipeline::ActionType::kBackwardWeight ||
                 type == pipeline::ActionType::kBackward) {
        held -= chunk_stash_bytes[t.action.chunk];
        --count;
      }
    }
    // Backward rebuilds one layer: all of it under full recomputation, the dropped
    // parts under selective recomputation.
    const int64_t rebuilt =
        recompute.full != RecomputePolicy::Full::kNone
            ? full_layer
            : full_layer - LayerStashBytes(shape, a, recompute.selective, false, false);
    m.activation_peak_bytes = peak + LayerBackwardWorkingBytes(shape, a) + rebuilt;
    ranks.push_back(m);
  }
  return ranks;
}

}  // namespace conveyor
