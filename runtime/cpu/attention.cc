#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/dropout.h"
#include "runtime/cpu/gemm.h"

namespace conveyor::cpu {
namespace {

// Where the pieces of head `h` of sample `b` live in the fused rows.
struct HeadView {
  int64_t q_offset;  // floats from the start of the sample's first qkv row
  int64_t k_offset;
  int64_t v_offset;
};

HeadView View(const AttentionShape& s, int64_t h) {
  const int64_t g = h / s.heads_per_group;
  const int64_t j = h % s.heads_per_group;
  const int64_t group_start = g * (s.heads_per_group + 2) * s.head_dim;
  return {group_start + j * s.head_dim, group_start + s.heads_per_group * s.head_dim,
          group_start + (s.heads_per_group + 1) * s.head_dim};
}

uint64_t DropoutIndex(const AttentionShape& s, const AttentionDropout& d, int64_t b, int64_t h) {
  return static_cast<uint64_t>(((d.first_sample + b) * d.total_heads + d.first_head + h) * s.seq *
                               s.seq);
}

bool HasDropout(const AttentionDropout& d) { return d.rng != nullptr && d.p > 0.0f; }

}  // namespace

void AttentionForward(const AttentionShape& s, const float* qkv, float scale,
                      const AttentionDropout& dropout, float* probs, float* ctx) {
  const int64_t ld = s.qkv_width();
  const int64_t ld_ctx = s.heads() * s.head_dim;
  const int64_t ss = s.seq * s.seq;
  std::vector<float> dropped(HasDropout(dropout) ? ss : 0);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* rows = qkv + b * s.seq * ld;
    for (int64_t h = 0; h < s.heads(); ++h) {
      const HeadView v = View(s, h);
      float* p = probs + (b * s.heads() + h) * ss;
      GemmStrided(false, true, s.seq, s.seq, s.head_dim, scale, rows + v.q_offset, ld,
                  rows + v.k_offset, ld, 0.0f, p, s.seq);
      for (int64_t i = 0; i < s.seq; ++i) {
        float* row = p + i * s.seq;
        const float max = *std::max_element(row, row + i + 1);
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        std::fill(row + i + 1, row + s.seq, 0.0f);  // causal mask
      }
      const float* p_used = p;
      if (HasDropout(dropout)) {
        ApplyDropout(*dropout.rng, dropout.p, DropoutIndex(s, dropout, b, h), ss, p,
                     dropped.data());
        p_used = dropped.data();
      }
      GemmStrided(false, false, s.seq, s.head_dim, s.seq, 1.0f, p_used, s.seq, rows + v.v_offset,
                  ld, 0.0f, ctx + b * s.seq * ld_ctx + h * s.head_dim, ld_ctx);
    }
  }
}

void AttentionBackward(const AttentionShape& s, const float* qkv, const float* probs,
                       const float* dctx, float scale, const AttentionDropout& dropout,
                       float* dqkv) {
  const int64_t ld = s.qkv_width();
  const int64_t ld_ctx = s.heads() * s.head_dim;
  const int64_t ss = s.seq * s.seq;
  std::memset(dqkv, 0, sizeof(float) * s.batch * s.seq * ld);
  std::vector<float> dp(ss);
  std::vector<float> dropped(HasDropout(dropout) ? ss : 0);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* rows = qkv + b * s.seq * ld;
    float* drows = dqkv + b * s.seq * ld;
    const float* dout = dctx + b * s.seq * ld_ctx;
    for (int64_t h = 0; h < s.heads(); ++h) {
      const HeadView v = View(s, h);
      const float* p = probs + (b * s.heads() + h) * ss;
      const float* p_used = p;
      if (HasDropout(dropout)) {
        ApplyDropout(*dropout.rng, dropout.p, DropoutIndex(s, dropout, b, h), ss, p,
                     dropped.data());
        p_used = dropped.data();
      }
      // dV += P'^T dO ; dP' = dO V^T
      GemmStrided(true, false, s.seq, s.head_dim, s.seq, 1.0f, p_used, s.seq, dout + h * s.head_dim,
                  ld_ctx, 1.0f, drows + v.v_offset, ld);
      GemmStrided(false, true, s.seq, s.seq, s.head_dim, 1.0f, dout + h * s.head_dim, ld_ctx,
                  rows + v.v_offset, ld, 0.0f, dp.data(), s.seq);
      if (HasDropout(dropout)) {
        ApplyDropout(*dropout.rng, dropout.p, DropoutIndex(s, dropout, b, h), ss, dp.data(),
                     dp.data());
      }
      // dS = P * (dP - rowsum(dP * P)), in place in dp.
      for (int64_t i = 0; i < s.seq; ++i) {
        float* dr = dp.data() + i * s.seq;
        const float* pr = p + i * s.seq;
        float dot = 0.0f;
        for (int64_t j = 0; j <= i; ++j) dot += dr[j] * pr[j];
        for (int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - dot);
        std::fill(dr + i + 1, dr + s.seq, 0.0f);
      }
      // dQ = scale dS K ; dK += scale dS^T Q
      GemmStrided(false, false, s.seq, s.head_dim, s.seq, scale, dp.data(), s.seq,
                  rows + v.k_offset, ld, 0.0f, drows + v.q_offset, ld);
      GemmStrided(true, false, s.seq, s.head_dim, s.seq, scale, dp.data(), s.seq, rows + v.q_offset,
                  ld, 1.0f, drows + v.k_offset, ld);
    }
  }
}

}  // namespace conveyor::cpu
