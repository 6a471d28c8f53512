#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/gemm.h"

namespace conveyor::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Offsets of head h's query and of its group's key and value, in floats from the start
// of a fused qkv row and of a packed kv row.
struct HeadView {
  int64_t q_offset;
  int64_t k_offset;  // in the packed kv row; the value head follows it
  int64_t fused_k_offset;
};

HeadView View(const AttentionShape& s, int64_t h) {
  const int64_t g = h / s.heads_per_group;
  const int64_t j = h % s.heads_per_group;
  const int64_t group_start = g * (s.heads_per_group + 2) * s.head_dim;
  return {group_start + j * s.head_dim, g * 2 * s.head_dim,
          group_start + s.heads_per_group * s.head_dim};
}

int64_t KvWidth(const AttentionShape& s) { return s.groups * 2 * s.head_dim; }

// Which keys one query row sees, and the dropout indices of its probabilities.
class RowMask {
 public:
  RowMask(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
          const AttentionDropout& dropout)
      : s_(s), key_rows_(key_rows), mask_(mask), dropout_(dropout),
        length_(dropout.sample_length > 0 ? dropout.sample_length : s.seq) {}

  void Select(int64_t b, int64_t h, int64_t i) {
    query_position_ = mask_.query_positions.empty() ? i : mask_.query_positions[i];
    document_start_ = mask_.document_start.empty() ? 0 : mask_.document_start[b * s_.seq + i];
    dropout_base_ = static_cast<uint64_t>(
        (((dropout_.first_sample + b) * dropout_.total_heads + dropout_.first_head + h) * length_ +
         query_position_) *
        length_);
  }
  int64_t KeyPosition(int64_t j) const {
    return mask_.key_positions.empty() ? j : mask_.key_positions[j];
  }
  bool Visible(int64_t j) const {
    const int64_t k = KeyPosition(j);
    return k >= document_start_ && k <= query_position_;
  }
  bool has_dropout() const { return dropout_.rng != nullptr && dropout_.p > 0.0f; }
  // in[j] * keep(j) / (1 - p) for each key j of the row.
  void Dropout(const float* in, float* out) const {
    const float keep_scale = 1.0f / (1.0f - dropout_.p);
    for (int64_t j = 0; j < key_rows_; ++j) {
      const uint64_t index = dropout_base_ + static_cast<uint64_t>(KeyPosition(j));
      out[j] = dropout_.rng->Uniform(index) >= dropout_.p ? in[j] * keep_scale : 0.0f;
    }
  }

 private:
  const AttentionShape& s_;
  int64_t key_rows_;
  const AttentionMask& mask_;
  const AttentionDropout& dropout_;
  int64_t length_;
  int64_t query_position_ = 0;
  int64_t document_start_ = 0;
  uint64_t dropout_base_ = 0;
};

}  // namespace

void PackKeysValues(const AttentionShape& s, const float* qkv, float* kv) {
  const int64_t ld = s.qkv_width(), kvw = KvWidth(s);
  for (int64_t r = 0; r < s.batch * s.seq; ++r) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const HeadView v = View(s, g * s.heads_per_group);
      std::memcpy(kv + r * kvw + v.k_offset, qkv + r * ld + v.fused_k_offset,
                  sizeof(float) * 2 * s.head_dim);
    }
  }
}

void AddKeyValueGrad(const AttentionShape& s, const float* dkv, float* dqkv) {
  const int64_t ld = s.qkv_width(), kvw = KvWidth(s);
  for (int64_t r = 0; r < s.batch * s.seq; ++r) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const HeadView v = View(s, g * s.heads_per_group);
      const float* from = dkv + r * kvw + v.k_offset;
      float* to = dqkv + r * ld + v.fused_k_offset;
      for (int64_t c = 0; c < 2 * s.head_dim; ++c) to[c] += from[c];
    }
  }
}

void AttentionBlockForward(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
                           const float* qkv, const float* kv, float scale,
                           const AttentionDropout& dropout, bool first, float* ctx, float* lse) {
  const int64_t ld = s.qkv_width(), kvw = KvWidth(s);
  const int64_t ld_ctx = s.heads() * s.head_dim;
  std::vector<float> scores(s.seq * key_rows);
  std::vector<float> dropped(key_rows);
  RowMask rows(s, key_rows, mask, dropout);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* q_rows = qkv + b * s.seq * ld;
    const float* kv_rows = kv + b * key_rows * kvw;
    for (int64_t h = 0; h < s.heads(); ++h) {
      const HeadView v = View(s, h);
      float* out = ctx + b * s.seq * ld_ctx + h * s.head_dim;
      float* row_lse = lse + (b * s.heads() + h) * s.seq;
      GemmStrided(false, true, s.seq, key_rows, s.head_dim, scale, q_rows + v.q_offset, ld,
                  kv_rows + v.k_offset, kvw, 0.0f, scores.data(), key_rows);
      for (int64_t i = 0; i < s.seq; ++i) {
        rows.Select(b, h, i);
        float* p = scores.data() + i * key_rows;
        float* out_row = out + i * ld_ctx;
        const float old_lse = first ? kNegInf : row_lse[i];
        float max = kNegInf;
        for (int64_t j = 0; j < key_rows; ++j) {
          if (rows.Visible(j)) max = std::max(max, p[j]);
        }
        if (max == kNegInf) {  // nothing visible in this block: the row is unchanged
          std::fill(p, p + key_rows, 0.0f);
          if (first) {
            row_lse[i] = kNegInf;
            std::fill(out_row, out_row + s.head_dim, 0.0f);
          }
          continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < key_rows; ++j) {
          if (rows.Visible(j)) sum += std::exp(p[j] - max);
        }
        const float block_lse = max + std::log(sum);
        const float new_lse =
            old_lse == kNegInf ? block_lse
                               : std::max(old_lse, block_lse) +
                                     std::log1p(std::exp(-std::fabs(old_lse - block_lse)));
        const float keep_old = old_lse == kNegInf ? 0.0f : std::exp(old_lse - new_lse);
        for (int64_t j = 0; j < key_rows; ++j) {
          p[j] = rows.Visible(j) ? std::exp(p[j] - new_lse) : 0.0f;
        }
        if (rows.has_dropout()) {
          rows.Dropout(p, dropped.data());
          std::copy(dropped.begin(), dropped.end(), p);
        }
        for (int64_t c = 0; c < s.head_dim; ++c) out_row[c] = keep_old == 0.0f ? 0.0f : out_row[c] * keep_old;
        row_lse[i] = new_lse;
      }
      GemmStrided(false, false, s.seq, s.head_dim, key_rows, 1.0f, scores.data(), key_rows,
                  kv_rows + v.k_offset + s.head_dim, kvw, 1.0f, out, ld_ctx);
    }
  }
}

void AttentionBlockBackward(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
                            const float* qkv, const float* kv, const float* ctx, const float* lse,
                            const float* dctx, float scale, const AttentionDropout& dropout,
                            float* dqkv, float* dkv) {
  const int64_t ld = s.qkv_width(), kvw = KvWidth(s);
  const int64_t ld_ctx = s.heads() * s.head_dim;
  std::vector<float> probs(s.seq * key_rows), dp(s.seq * key_rows);
  std::vector<float> row(key_rows);
  RowMask rows(s, key_rows, mask, dropout);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* q_rows = qkv + b * s.seq * ld;
    const float* kv_rows = kv + b * key_rows * kvw;
    float* dq_rows = dqkv + b * s.seq * ld;
    float* dkv_rows = dkv + b * key_rows * kvw;
    for (int64_t h = 0; h < s.heads(); ++h) {
      const HeadView v = View(s, h);
      const float* out = ctx + b * s.seq * ld_ctx + h * s.head_dim;
      const float* dout = dctx + b * s.seq * ld_ctx + h * s.head_dim;
      const float* row_lse = lse + (b * s.heads() + h) * s.seq;
      GemmStrided(false, true, s.seq, key_rows, s.head_dim, scale, q_rows + v.q_offset, ld,
                  kv_rows + v.k_offset, kvw, 0.0f, probs.data(), key_rows);
      // dP' = dO V^T
      GemmStrided(false, true, s.seq, key_rows, s.head_dim, 1.0f, dout, ld_ctx,
                  kv_rows + v.k_offset + s.head_dim, kvw, 0.0f, dp.data(), key_rows);
      for (int64_t i = 0; i < s.seq; ++i) {
        rows.Select(b, h, i);
        float* p = probs.data() + i * key_rows;
        float* d = dp.data() + i * key_rows;
        for (int64_t j = 0; j < key_rows; ++j) {
          p[j] = rows.Visible(j) ? std::exp(p[j] - row_lse[i]) : 0.0f;
        }
        float row_dot = 0.0f;  // D = dO . O
        for (int64_t c = 0; c < s.head_dim; ++c) row_dot += dout[i * ld_ctx + c] * out[i * ld_ctx + c];
        if (rows.has_dropout()) rows.Dropout(d, d);  // dP = dropout(dP')
        for (int64_t j = 0; j < key_rows; ++j) d[j] = p[j] * (d[j] - row_dot);  // dS
        if (rows.has_dropout()) {  // P' for dV
          rows.Dropout(p, row.data());
          std::copy(row.begin(), row.end(), p);
        }
      }
      // dV += P'^T dO ; dQ += scale dS K ; dK += scale dS^T Q
      GemmStrided(true, false, key_rows, s.head_dim, s.seq, 1.0f, probs.data(), key_rows, dout,
                  ld_ctx, 1.0f, dkv_rows + v.k_offset + s.head_dim, kvw);
      GemmStrided(false, false, s.seq, s.head_dim, key_rows, scale, dp.data(), key_rows,
                  kv_rows + v.k_offset, kvw, 1.0f, dq_rows + v.q_offset, ld);
      GemmStrided(true, false, key_rows, s.head_dim, s.seq, scale, dp.data(), key_rows,
                  q_rows + v.q_offset, ld, 1.0f, dkv_rows + v.k_offset, kvw);
    }
  }
}

void AttentionForward(const AttentionShape& s, const AttentionMask& mask, const float* qkv,
                      float scale, const AttentionDropout& dropout, float* lse, float* ctx) {
  std::vector<float> kv(s.batch * s.seq * KvWidth(s));
  PackKeysValues(s, qkv, kv.data());
  AttentionBlockForward(s, s.seq, mask, qkv, kv.data(), scale, dropout, /*first=*/true, ctx, lse);
}

void AttentionBackward(const AttentionShape& s, const AttentionMask& mask, const float* qkv,
                       const float* lse, const float* ctx, const float* dctx, float scale,
                       const AttentionDropout& dropout, float* dqkv) {
  const int64_t rows = s.batch * s.seq;
  std::vector<float> kv(rows * KvWidth(s)), dkv(rows * KvWidth(s), 0.0f);
  PackKeysValues(s, qkv, kv.data());
  std::memset(dqkv, 0, sizeof(float) * rows * s.qkv_width());
  AttentionBlockBackward(s, s.seq, mask, qkv, kv.data(), ctx, lse, dctx, scale, dropout, dqkv,
                         dkv.data());
  AddKeyValueGrad(s, dkv.data(), dqkv);
}

}  // namespace conveyor::cpu
