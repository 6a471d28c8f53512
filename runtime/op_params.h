// The parameter types of the op interface (runtime/ops.h), shared by every backend:
// which norm, the shape of grouped-query attention and its dropout, the RoPE table.
#ifndef CONVEYOR_RUNTIME_OP_PARAMS_H_
#define CONVEYOR_RUNTIME_OP_PARAMS_H_

#include <cstdint>
#include <vector>

#include "runtime/philox.h"
#include "runtime/rope_scaling.h"

namespace conveyor {

enum class NormKind { kLayerNorm, kRmsNorm };

// Causal attention over a fused QKV matrix [batch * seq, qkv_width()] in Megatron's
// grouped layout: for each query group, its `heads_per_group` query heads, then its key
// head, each head_dim wide, then its value head, value_dim() wide. The value heads, and so
// the context's heads, are narrower or wider than the query and key heads only under
// multi-latent attention (DeepSeek-V2's v_head_dim against qk_head_dim +
// qk_rope_head_dim).
struct AttentionShape {
  int64_t batch;   // samples
  int64_t seq;     // tokens per sample
  int64_t groups;  // key/value heads held here
  int64_t heads_per_group;
  int64_t head_dim;
  int64_t v_head_dim = 0;  // 0: head_dim

  int64_t heads() const { return groups * heads_per_group; }
  int64_t value_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  // One group's query and key heads, then its value head.
  int64_t group_width() const { return (heads_per_group + 1) * head_dim + value_dim(); }
  int64_t qkv_width() const { return groups * group_width(); }
  // The context's row: every head's value_dim() outputs.
  int64_t context_width() const { return heads() * value_dim(); }
  // A packed key/value row (PackKeysValues): per group, its key head then its value head.
  int64_t kv_width() const { return groups * (head_dim + value_dim()); }
};

// Attention dropout element (sample, head, i, j), i and j the query's and the key's
// positions in the sample, has global index
//   ((first_sample + sample) * total_heads + first_head + head) * L^2 + i * L + j,
// L = sample_length (0: the shape's seq, the whole sample held here), so tensor- and
// context-parallel ranks (holding heads [first_head, ...) and some of the positions)
// draw the single-rank mask.
struct AttentionDropout {
  const CounterRng* rng = nullptr;  // null or p == 0: no dropout
  float p = 0.0f;
  int64_t first_sample = 0;
  int64_t first_head = 0;
  int64_t total_heads = 0;
  int64_t sample_length = 0;
};

// cos and sin of every (position, pair) angle of rotary position embedding,
// [seq, head_dim / 2] each, in fp32 like Megatron's inv_freq = 1 / base^(2i / d), or
// scaled (runtime/rope_scaling.h; YaRN's concentration factor multiplies both, so a
// rotation by the table is that factor times an orthogonal map, and its transpose, what
// gradients need, is the same factor times the rotation by -angle).
struct RopeTable {
  RopeTable(int64_t seq, int64_t head_dim, float base, const RopeScaling& scaling = {});
  int64_t half;
  std::vector<float> cos;
  std::vector<float> sin;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_OP_PARAMS_H_
