#include "model/memory_model.h"

#include <algorithm>
#include <numeric>

#include "absl/types/span.h"
#include "base/status_macros.h"
#include "model/bucket_layout.h"
#include "model/layer_stash.h"
#include "model/moe_layer.h"
#include "model/mtp_block.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/bubble.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/rank_layout.h"

namespace conveyor {
namespace {

constexpr int64_t kFloat = 4;

struct Sizes {
  int64_t tokens;         // T: the micro-batch's tokens
  int64_t local_tokens;   // outside the TP region (T / TP under SP)
  int64_t heads;          // held by this TP rank
  int64_t qkv, fc1, ffn;  // local widths
  int64_t qk_heads;       // query and key heads normalised per token (--qk-layernorm)
};

Sizes SizesOf(const ModelShape& s, const ActivationShape& a) {
  Sizes z;
  z.tokens = a.micro_batch * a.seq;
  z.local_tokens = a.sequence_parallel ? z.tokens / a.tp : z.tokens;
  z.heads = s.heads / a.tp;
  z.qkv = s.qkv_width() / a.tp;
  z.fc1 = s.fc1_width() / a.tp;
  z.ffn = s.ffn_hidden / a.tp;
  z.qk_heads = s.qk_layernorm && !s.mla.enabled ? (s.heads + s.query_groups) / a.tp : 0;
  return z;
}

// What attention keeps for its backward: each row's fp32 log-sum-exp.
int64_t AttentionSavedBytes(const Sizes& z, const ActivationShape& a) {
  return kFloat * a.micro_batch * z.heads * a.seq;
}

// Ring attention's blocks during a layer's backward (model/ring_attention.cc): the held
// and the arriving key/value block, and their fp32 gradient accumulators.
int64_t RingAttentionBytes(const ModelShape& s, const ActivationShape& a) {
  if (a.cp == 1) return 0;
  const int64_t block =
      a.micro_batch * a.seq * (s.query_groups / a.tp) * (s.head_dim + s.value_head_dim());
  return 2 * block * a.bytes + 2 * block * kFloat;
}

// Two norms' mean and rstd per local token, and the query and key heads' per token,
// fp32.
int64_t NormStatsBytes(const Sizes& z) {
  return kFloat * 4 * z.local_tokens + kFloat * 2 * z.qk_heads * z.tokens;
}

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
      columns = z.heads * s.value_head_dim();
      break;
    case StashColumns::kFc1:
      columns = z.fc1;
      break;
    case StashColumns::kFfn:
      columns = z.ffn;
      break;
    case StashColumns::kQkHeads:
      columns = z.qk_heads * s.head_dim;
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

// A parameter as the model state sees it: its local elements and who reads it.
struct ParameterExtent {
  int64_t elements;
  // Parameter::read_in_compute_type: a bf16 copy under --bf16, and bf16 values only
  // under the distributed optimizer.
  bool read_in_compute_type;
  // Parameter::expert_parallel: in the buffers of the expert-data-parallel group.
  bool expert_parallel = false;
  // Its gradient is summed over TP after the backward (trainer/optimization/parameter_updater.cc's
  // ReduceSharedGradients): replicated, but each rank sees a part of it.
  bool summed_over_tp = false;
};

// Multi-latent attention's projections in the order model/mla_attention.cc creates them:
// the replicated down-projections and latent norms (each rank's gradient covers its heads,
// so it is summed over TP), the up-projections split by heads; none has a bias.
void AppendMla(const ModelShape& s, int tp, std::vector<ParameterExtent>* out) {
  const MlaShape& m = s.mla;
  const bool summed = tp > 1;
  auto norm = [&](int64_t width) {
    if (!s.qk_layernorm) return;
    out->push_back({width, false, false, summed});
    if (!s.rms_norm) out->push_back({width, false, false, summed});
  };
  const int64_t q_rows = s.heads / tp * m.q_head_dim();
  if (m.q_lora_rank > 0) {
    out->push_back({m.q_lora_rank * s.hidden, true, false, summed});
    norm(m.q_lora_rank);
    out->push_back({q_rows * m.q_lora_rank, true});
  } else {
    out->push_back({q_rows * s.hidden, true});
  }
  out->push_back({(m.kv_lora_rank + m.qk_pos_emb_head_dim) * s.hidden, true, false, summed});
  norm(m.kv_lora_rank);
  out->push_back({s.heads / tp * (m.qk_head_dim + m.v_head_dim) * m.kv_lora_rank, true});
}

// Global layer `layer`'s parameters in the order the layer creates them
// (model/transformer_layer.cc; a mixture of experts': model/moe_layer.cc).
void AppendLayer(const ModelShape& s, const ActivationShape& a, int64_t layer,
                 std::vector<ParameterExtent>* out) {
  const int tp = a.tp, ep = a.ep, etp = a.etp;
  auto norm = [&](int64_t width, bool summed_over_tp) {
    out->push_back({width, false, false, summed_over_tp});
    if (!s.rms_norm) out->push_back({width, false, false, summed_over_tp});
  };
  auto linear = [&](int64_t rows, int64_t columns, int64_t bias, bool has_bias) {
    out->push_back({rows * columns, true});
    if (has_bias) out->push_back({bias, false});
  };
  const int64_t qkv = s.qkv_width() / tp, fc1 = s.fc1_width() / tp;
  // The norms see the rank's sequence shard under SP, the head norms its heads always.
  norm(s.hidden, a.sequence_parallel);
  if (s.mla.enabled) {
    AppendMla(s, tp, out);
  } else {
    linear(qkv, s.hidden, qkv, s.has_qkv_bias());
  }
  if (s.qk_layernorm && !s.mla.enabled) {  // the query heads' norm, then the key heads'
    norm(s.head_dim, tp > 1);
    norm(s.head_dim, tp > 1);
  }
  linear(s.hidden, s.heads * s.value_head_dim() / tp, s.hidden, s.linear_bias);
  norm(s.hidden, a.sequence_parallel);
  if (s.moe.IsMoeLayer(layer)) {  // the router, the experts, the shared expert
    const std::vector<int64_t> elements = MoeWeightElements(s, tp, ep, etp);
    const size_t expert_weights = 2 * static_cast<size_t>(s.moe.experts() / ep);
    const bool own_replicas = ExpertsHaveOwnGroups(tp, ep, etp);  // Parameter::expert_parallel
    // The router (i = 0) and the shared expert's gate (last) are summed under SP.
    for (size_t i = 0; i < elements.size(); ++i) {
      const bool gate = s.moe.shared_expert_gate && i + 1 == elements.size();
      out->push_back({elements[i], true, own_replicas && i >= 1 && i <= expert_weights,
                      (i == 0 || gate) && a.sequence_parallel});
    }
    return;
  }
  linear(fc1, s.hidden, fc1, s.linear_bias);
  linear(s.hidden, s.ffn_hidden / tp, s.hidden, s.linear_bias);
}

// The model state's bytes of one rank, as the updaters lay it out
// (trainer/optimization/replicated_updater.cc, trainer/optimization/distributed_optimizer.cc).
struct ModelStateBytes {
  int64_t weights = 0, grads = 0, optimizer = 0, padding = 0;
};

// The buffers of parameters replicated over `dp` ranks (this rank the `dp_rank`th).
ModelStateBytes ReplicaGroupState(const std::vector<ParameterExtent>& params,
                                  const MemoryInputs& inputs, int dp, int dp_rank) {
  const bool bf16 = inputs.bf16;
  const int64_t state = (inputs.adam ? 2 : 1) * kFloat;  // AdamW: two moments; SGD: momentum
  ModelStateBytes m;
  // --grad-reduce-in-bf16 rounds the bucket it reduces into a bf16 staging buffer.
  const bool staged = inputs.grad_reduce_in_bf16 && dp > 1;
  int64_t largest_bucket = 0;
  if (!inputs.distributed_optimizer) {
    std::vector<int64_t> sizes;
    for (auto it = params.rbegin(); it != params.rend(); ++it) sizes.push_back(it->elements);
    for (const BucketSpan& b : LayOutBuckets(sizes, inputs.ddp_bucket_size, 1)) {
      largest_bucket = std::max(largest_bucket, b.size);
    }
    for (const ParameterExtent& p : params) {
      m.weights += kFloat * p.elements + (bf16 && p.read_in_compute_type ? 2 * p.elements : 0);
      m.grads += kFloat * p.elements;
      m.optimizer += state * p.elements;
    }
    if (staged) m.grads += 2 * largest_bucket;
    return m;
  }
  for (const bool bf16_values : {false, true}) {
    // In buffer order: the model's order reversed.
    std::vector<int64_t> sizes;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      if ((bf16 && it->read_in_compute_type) == bf16_values) sizes.push_back(it->elements);
    }
    if (sizes.empty()) continue;
    for (const BucketSpan& b : LayOutBuckets(sizes, inputs.ddp_bucket_size, dp)) {
      largest_bucket = std::max(largest_bucket, b.size);
      m.grads += kFloat * b.size;
      m.padding += b.size - b.used;
      m.optimizer += state * UsedInSlice(b, dp, dp_rank);
      if (bf16_values) {
        m.weights += 2 * b.size;
        m.optimizer += kFloat * b.size / dp;  // the fp32 master of the owned slice
      } else {
        m.weights += kFloat * b.size;
      }
    }
  }
  if (staged) m.grads += 2 * largest_bucket;
  return m;
}

// The model state of a rank at place `dp_rank` of `dp` data x context ranks (tensor-
// parallel rank 0): the parameters replicated over all of them, and under expert
// parallelism the experts', replicated over the expert-data-parallel ranks: the
// dp x (TP / ETP) ranks of the stage holding a copy of an expert shard, over EP (place
// dp_rank x (TP / ETP) / EP, parallel/rank_layout.h), each in buffers of their own.
ModelStateBytes ModelState(const std::vector<ParameterExtent>& params,
                           const MemoryInputs& inputs, int dp, int dp_rank,
                           const ActivationShape& a) {
  std::vector<ParameterExtent> dense, experts;
  for (const ParameterExtent& p : params) (p.expert_parallel ? experts : dense).push_back(p);
  ModelStateBytes m = ReplicaGroupState(dense, inputs, dp, dp_rank);
  if (experts.empty()) return m;
  const ModelStateBytes e =
      ReplicaGroupState(experts, inputs, ExpertDataParallelSize(dp * a.tp, a.ep, a.etp),
                        dp_rank * (a.tp / a.etp) / a.ep);
  m.weights += e.weights;
  m.grads += e.grads;
  m.optimizer += e.optimizer;
  m.padding += e.padding;
  return m;
}

// The dense MLP's tensors of a layer's stash, which a mixture-of-experts layer replaces.
bool DenseMlpTensor(const StashTensor& t) {
  return t.tensor == &LayerStash::fc1_out || t.tensor == &LayerStash::act ||
         t.tensor == &LayerStash::d_fc1 || t.tensor == &LayerStash::d_fc2_full;
}

// Rows of a mixture-of-experts layer's permuted tokens for one micro-batch on a rank
// holding `tokens` of its tokens (1 / CP of them): every routing slot; under a capacity
// (the whole micro-batch's: the router decides over all its tokens, model/moe_router.h)
// at most what the experts keep, or exactly their padded inputs (each expert padded to
// the capacity, at most the rank's tokens).
int64_t MoeRows(const ModelShape& s, int64_t tokens, int cp) {
  const MoeShape& moe = s.moe;
  const int64_t slots = tokens * moe.router.topk;
  if (!moe.drops_tokens()) return slots;
  const int64_t capacity =
      ExpertCapacity(tokens * cp, moe.router.topk, moe.experts(), moe.capacity_factor);
  return moe.pad_to_capacity ? moe.experts() * std::min(tokens, capacity)
                             : std::min(slots, moe.experts() * capacity);
}

// How much more (or less) an MoE layer (model/moe_layer.cc) holds than the dense one:
// after forward, each expert's input and output rows with its fc1 output and activation,
// and the shared expert's fc1 output and activation; between B and W, the input rows,
// their output gradient, the experts' activations and fc1 gradients, the shared expert's
// with the gradient it read, and the router logits' gradient. Less the dense MLP's
// tensors held at that point.
int64_t MoeStashDifference(const ModelShape& s, const ActivationShape& a,
                           const SelectiveRecompute& selective, bool awaiting_weight) {
  const int64_t tokens = a.micro_batch * a.seq, rows = MoeRows(s, tokens, a.cp);
  // Every TP rank permutes every token. Its experts run and keep its share of the rows
  // (1 / (TP / ETP) of them, model/expert_row_share.h; under expert parallelism as many
  // on average as it sends, uniform routing assumed); their widths are 1/ETP, the shared
  // expert's 1/TP.
  const int64_t row_parts = a.tp / a.etp;
  const int64_t share = (rows + row_parts - 1) / row_parts;
  const int64_t fc1_halves = s.swiglu ? 2 : 1;
  const int64_t expert = (fc1_halves + 1) * s.moe.ffn_hidden / a.etp;
  const int64_t shared = (fc1_halves + 1) * s.moe.shared_expert_ffn / a.tp;
  // The experts' input rows; after forward their output rows (all of them, zero outside
  // the share), between B and W the output gradient of the share.
  int64_t moe = share * s.hidden + (awaiting_weight ? share : rows) * s.hidden +
                share * expert + tokens * shared;
  if (awaiting_weight) moe += tokens * (shared > 0 ? s.hidden : 0);
  // Between B and W the router logits' gradient, of the gate's dtype (fp32 under
  // --moe-router-dtype fp32, model/moe_router.h).
  const int64_t router_grad =
      awaiting_weight ? tokens * s.moe.experts() * (s.moe.router_fp32 ? kFloat : a.bytes) : 0;
  const auto dense_held = [&](const StashTensor& t) {
    return DenseMlpTensor(t) &&
           (awaiting_weight ? t.kept_for_weight : !DroppedAfterForward(t, selective));
  };
  int64_t dense = HeldBytes(kForwardStash, s, a, dense_held);
  if (awaiting_weight) dense += HeldBytes(kWeightGradientStash, s, a, dense_held);
  return a.bytes * moe + router_grad - dense;
}

// What multi-latent attention's projections keep (model/mla_attention.h's MlaStash):
// after forward, the latents before and after their norms (one tensor without the norms)
// with the norms' fp32 statistics; between B and W also the gradients of the query and
// key/value heads, of the latents after and before their norms, and of W_dkv's output.
int64_t MlaStashBytes(const ModelShape& s, const ActivationShape& a, bool awaiting_weight) {
  if (!s.mla.enabled) return 0;
  const MlaShape& m = s.mla;
  const int64_t tokens = a.micro_batch * a.seq, heads = s.heads / a.tp;
  const int64_t copies = s.qk_layernorm ? 2 : 1;  // before and after the norm
  const int64_t norms = s.qk_layernorm ? (m.q_lora_rank > 0 ? 2 : 1) : 0;
  int64_t columns = copies * (m.q_lora_rank + m.kv_lora_rank);
  if (awaiting_weight) {
    columns += heads * m.q_head_dim() + copies * m.q_lora_rank +
               heads * (m.qk_head_dim + m.v_head_dim) + m.kv_lora_rank +
               m.kv_lora_rank + m.qk_pos_emb_head_dim;
  }
  return a.bytes * tokens * columns + kFloat * 2 * norms * tokens;
}

}  // namespace

int64_t LayerStashBytes(const ModelShape& s, const ActivationShape& a,
                        const SelectiveRecompute& selective, bool full_recompute,
                        bool keeps_checkpoint) {
  const Sizes z = SizesOf(s, a);
  if (full_recompute) return keeps_checkpoint ? a.bytes * z.local_tokens * s.hidden : 0;
  return HeldBytes(kForwardStash, s, a,
                   [&](const StashTensor& t) { return !DroppedAfterForward(t, selective); }) +
         NormStatsBytes(z) + MlaStashBytes(s, a, /*awaiting_weight=*/false);
}

int64_t LayerAwaitingWeightBytes(const ModelShape& s, const ActivationShape& a) {
  const auto kept = [](const StashTensor& t) { return t.kept_for_weight; };
  return HeldBytes(kForwardStash, s, a, kept) + HeldBytes(kWeightGradientStash, s, a, kept) +
         NormStatsBytes(SizesOf(s, a)) + MlaStashBytes(s, a, /*awaiting_weight=*/true);
}

int64_t HeadStashBytes(const ModelShape& s, const ActivationShape& a) {
  const Sizes z = SizesOf(s, a);
  const int64_t vocab = s.padded_vocab / a.tp;
  // Final norm input and gathered output, logits; the fp32 log-sum-exps and norm
  // statistics.
  return a.bytes * (z.local_tokens * s.hidden + z.tokens * s.hidden + z.tokens * vocab) +
         kFloat * (z.tokens + 2 * z.local_tokens);
}

int64_t MtpStashBytes(const ModelShape& s, const ActivationShape& a,
                      const SelectiveRecompute& selective) {
  if (s.mtp_layers == 0) return 0;
  const Sizes z = SizesOf(s, a);
  const ModelShape layer_shape = MtpLayerShape(s);
  const int64_t local = z.local_tokens * s.hidden, full = z.tokens * s.hidden;
  // Per depth: the embedding e, h^{k-1} (under SP a shard the head's gathered copy is not),
  // M_k's gathered input [e; h], the layer's output, the output loss's gathered input and
  // logits; fp32: three norms' statistics and the log-sum-exps.
  int64_t depth = a.bytes * (local + (a.sequence_parallel ? local : 0) + 2 * full + local + full +
                             z.tokens * (s.padded_vocab / a.tp)) +
                  kFloat * (6 * z.local_tokens + z.tokens) +
                  LayerStashBytes(layer_shape, a, selective, false, false);
  if (layer_shape.moe.IsMoeLayer(s.num_layers)) {
    depth += MoeStashDifference(layer_shape, a, selective, false);
  }
  return s.mtp_layers * depth;
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
             (local /* dy */ + local /* d_fc2 */ + z.tokens * z.fc1 /* d_fc1 */ +
              local /* d_ln2 */ + local /* d_x1 */ + local /* d_proj */ +
              z.tokens * z.heads * s.value_head_dim() /* d_ctx */ + z.tokens * z.qkv /* d_qkv */ +
              local /* d_ln1 */ + local /* dx */ + gathered) +
         RingAttentionBytes(s, a);
}

namespace {

// The multi-token prediction depths' parameters (model/mtp_block.cc's order): enorm,
// hnorm, M_k (its output rows split over TP), the layer, its final norm.
void AppendMtpDepths(const ModelShape& s, const ActivationShape& a,
                     std::vector<ParameterExtent>* params) {
  const ModelShape layer_shape = MtpLayerShape(s);
  auto norm = [&] {
    params->push_back({s.hidden, false, false, a.sequence_parallel});
    if (!s.rms_norm) params->push_back({s.hidden, false, false, a.sequence_parallel});
  };
  for (int64_t k = 0; k < s.mtp_layers; ++k) {
    norm();
    norm();
    params->push_back({s.hidden / a.tp * 2 * s.hidden, true});
    AppendLayer(layer_shape, a, s.num_layers + k, params);
    norm();
  }
}

// The parameters of global stage `stage` (of `stages`), whose layers are
// [first_layer, first_layer + num_layers), in model/gpt_model.cc's order (GptStage::parameters).
void AppendStageParameters(const ModelShape& s, const ActivationShape& a, int stage, int stages,
                           int64_t first_layer, int64_t num_layers,
                           std::vector<ParameterExtent>* params) {
  const bool first = stage == 0, last = stage == stages - 1;
  const int64_t vocab_rows = s.padded_vocab / a.tp;
  // The last stage's copy of the word embedding: tied, or read by the MTP depths.
  if (first || (last && (s.tied_embeddings || s.mtp_layers > 0))) {
    params->push_back({vocab_rows * s.hidden, true});
  }
  if (first && s.learned_positions()) {
    params->push_back({s.max_positions * s.hidden, false, false, a.sequence_parallel});
  }
  for (int64_t i = 0; i < num_layers; ++i) AppendLayer(s, a, first_layer + i, params);
  if (last) {
    params->push_back({s.hidden, false, false, a.sequence_parallel});
    if (!s.rms_norm) params->push_back({s.hidden, false, false, a.sequence_parallel});
    if (!s.tied_embeddings) params->push_back({vocab_rows * s.hidden, true});
    AppendMtpDepths(s, a, params);
  }
}

// What one micro-batch leaves held by a model chunk: from its F until its B, and
// (zero-bubble schedules, which run W later) from its B until its W.
struct ChunkHeldBytes {
  int64_t stash = 0;
  int64_t awaiting = 0;
};

// A chunk's held bytes: its layers [first_layer, first_layer + num_layers) under
// `recompute` (whose layer indices count within the chunk), and the head on the last stage.
ChunkHeldBytes ChunkBytes(const ModelShape& s, const ActivationShape& a,
                          const RecomputePolicy& recompute, bool deferred_weights, bool last,
                          int64_t first_layer, int64_t num_layers) {
  ChunkHeldBytes chunk;
  for (int64_t i = 0; i < num_layers; ++i) {
    const bool moe = s.moe.IsMoeLayer(first_layer + i);
    chunk.stash += LayerStashBytes(s, a, recompute.selective, recompute.Recomputes(i),
                                   recompute.KeepsCheckpoint(i));
    if (moe && !recompute.Recomputes(i)) {
      chunk.stash += MoeStashDifference(s, a, recompute.selective, false);
    }
    if (deferred_weights) {
      chunk.awaiting += LayerAwaitingWeightBytes(s, a) +
                        (moe ? MoeStashDifference(s, a, recompute.selective, true) : 0);
    }
  }
  if (last) chunk.stash += HeadStashBytes(s, a) + MtpStashBytes(s, a, recompute.selective);
  return chunk;
}

// Walks a rank's schedule: a (micro-batch, chunk) holds its chunk's stash from its F
// until its B, then (split backward) what W needs until its W. Returns the peak of the
// sum; `peak_stashed` gets the most (micro-batch, chunk) pairs held at once.
int64_t PeakHeldBytes(absl::Span<const pipeline::TimedAction> actions,
                      absl::Span<const ChunkHeldBytes> chunks, int* peak_stashed) {
  int64_t held = 0, peak = 0;
  int count = 0;
  for (const pipeline::TimedAction& t : actions) {
    const ChunkHeldBytes& chunk = chunks[t.action.chunk];
    switch (t.action.type) {
      case pipeline::ActionType::kForward:
        held += chunk.stash;
        *peak_stashed = std::max(*peak_stashed, ++count);
        break;
      case pipeline::ActionType::kBackwardInput:
        held += chunk.awaiting - chunk.stash;
        break;
      case pipeline::ActionType::kBackwardWeight:
        held -= chunk.awaiting;
        --count;
        break;
      case pipeline::ActionType::kBackward:
        held -= chunk.stash;
        --count;
        break;
      default:
        break;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

// The micro-batch's activation shape on one rank under `inputs`' layout.
ActivationShape ActivationShapeOf(const MemoryInputs& inputs, const ModelShape& shape) {
  const ParallelSizes& l = inputs.layout;
  const int cp = std::max(1, l.cp);
  return ActivationShape{inputs.micro_batch_size,
                         shape.seq / cp,
                         l.tp,
                         inputs.sequence_parallel && l.tp > 1,
                         inputs.bf16 ? 2 : kFloat,
                         cp,
                         std::max(1, l.ep),
                         l.etp};
}

// What backward rebuilds of one layer: all of it under full recomputation, the dropped
// parts under selective recomputation (the larger of a dense and an MoE layer when both
// are present).
int64_t RebuiltLayerBytes(const ModelShape& shape, const ActivationShape& a,
                          const RecomputePolicy& recompute) {
  auto layer_stash = [&](const SelectiveRecompute& selective) {
    int64_t bytes = LayerStashBytes(shape, a, selective, false, false);
    if (shape.moe.experts() > 0) {
      bytes += std::max<int64_t>(0, MoeStashDifference(shape, a, selective, false));
    }
    return bytes;
  };
  const int64_t full_layer = layer_stash({});  // a layer rebuilt whole
  return recompute.full != RecomputePolicy::Full::kNone
             ? full_layer
             : full_layer - layer_stash(recompute.selective);
}

}  // namespace

absl::StatusOr<std::vector<RankMemory>> PredictMemory(const MemoryInputs& inputs,
                                                      const ModelShape& shape,
                                                      const pipeline::Timeline& timeline,
                                                      int data_parallel_rank) {
  const int P = inputs.layout.pp;
  const int V = std::max(1, inputs.virtual_stages);
  const int dp = std::max(1, inputs.layout.dp);
  const std::vector<int64_t>& layers = inputs.layers_per_stage;
  if (static_cast<int64_t>(layers.size()) != int64_t{P} * V) {
    return absl::InvalidArgumentError("PredictMemory: layers_per_stage needs P x V stages");
  }
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(inputs.pipeline_schedule));
  const ActivationShape a = ActivationShapeOf(inputs, shape);
  const RecomputePolicy& recompute = inputs.recompute;
  const bool deferred_weights = schedule.name.rfind("zb", 0) == 0;  // zb-h1, zb-h2, zbv
  const int64_t rebuilt = RebuiltLayerBytes(shape, a, recompute);
  if (static_cast<int>(timeline.ranks.size()) != P) {
    return absl::InvalidArgumentError("PredictMemory: the schedule's timeline needs P ranks");
  }

  std::vector<RankMemory> ranks;
  for (int r = 0; r < P; ++r) {
    RankMemory m;
    m.pipeline_rank = r;
    std::vector<ChunkHeldBytes> chunks(V);
    std::vector<ParameterExtent> params;  // in the stage's order (GptStage::parameters)
    for (int c = 0; c < V; ++c) {
      const int stage = pipeline::GlobalStage(schedule.layout, P, r, c);
      const bool first = stage == 0, last = stage == P * V - 1;
      const int64_t first_layer =
          std::accumulate(layers.begin(), layers.begin() + stage, int64_t{0});
      AppendStageParameters(shape, a, stage, P * V, first_layer, layers[stage], &params);
      chunks[c] =
          ChunkBytes(shape, a, recompute, deferred_weights, last, first_layer, layers[stage]);
      m.first_stage = m.first_stage || first;
      m.last_stage = m.last_stage || last;
      m.stash_bytes_per_micro_batch += std::max(chunks[c].stash, chunks[c].awaiting);
    }
    for (const ParameterExtent& e : params) {
      m.parameters += e.elements;
      if (e.summed_over_tp) m.tp_summed_elements += e.elements;
    }
    // The ranks holding the same parameters are DP x CP: the distributed optimizer's shards.
    const ModelStateBytes state = ModelState(params, inputs, dp * a.cp, data_parallel_rank, a);
    m.weight_bytes = state.weights;
    m.grad_bytes = state.grads;
    m.optimizer_bytes = state.optimizer;
    m.bucket_padding = state.padding;
    // The peak of the stashes the schedule holds at once, then one layer's backward
    // working set and what its backward rebuilds.
    m.activation_peak_bytes = PeakHeldBytes(timeline.ranks[r], chunks, &m.peak_stashed) +
                              LayerBackwardWorkingBytes(shape, a) + rebuilt;
    ranks.push_back(m);
  }
  return ranks;
}

absl::Status ExtendToMicroBatches(const MemoryInputs& inputs, int simulated_micro_batches,
                                  std::vector<RankMemory>* memory) {
  const int P = inputs.layout.pp;
  const int V = std::max(1, inputs.virtual_stages);
  const int M = inputs.num_micro_batches;
  if (simulated_micro_batches >= M) return absl::OkStatus();
  for (RankMemory& m : *memory) {
    ASSIGN_OR_RETURN(const int run,
                     pipeline::PeakStashed(inputs.pipeline_schedule, P, V, M, m.pipeline_rank));
    ASSIGN_OR_RETURN(const int simulated,
                     pipeline::PeakStashed(inputs.pipeline_schedule, P, V, simulated_micro_batches,
                                           m.pipeline_rank));
    if (run <= simulated) continue;
    m.peak_stashed += run - simulated;
    m.activation_peak_bytes += int64_t{run - simulated} * m.stash_bytes_per_micro_batch;
  }
  return absl::OkStatus();
}

double MegatronBytesPerParameter(const MemoryInputs& inputs) {
  const bool bf16 = inputs.bf16;
  const double sharded = (bf16 ? kFloat : 0) + (inputs.adam ? 2 : 1) * kFloat;
  const int shards =
      inputs.distributed_optimizer ? inputs.layout.dp * std::max(1, inputs.layout.cp) : 1;
  return (bf16 ? 2 : kFloat) + kFloat + sharded / std::max(1, shards);
}

}  // namespace conveyor
