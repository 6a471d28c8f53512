#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "runtime/cpu/attention_tiles.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/vector_math.h"

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
  const int64_t group_start = g * s.group_width();
  return {group_start + j * s.head_dim, g * (s.head_dim + s.value_dim()),
          group_start + s.heads_per_group * s.head_dim};
}

// Which keys one query row sees, and the dropout indices of its probabilities. Key
// positions ascend (a block holds whole chunks in order), so the keys a row sees are one
// range of key rows, [begin(), end()).
class RowMask {
 public:
  RowMask(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
          const AttentionDropout& dropout)
      : s_(s),
        key_rows_(key_rows),
        mask_(mask),
        dropout_(dropout),
        length_(dropout.sample_length > 0 ? dropout.sample_length : s.seq) {
    assert(std::is_sorted(mask.key_positions.begin(), mask.key_positions.end()));
  }

  void Select(int64_t b, int64_t h, int64_t i) {
    const int64_t query_position = mask_.query_positions.empty() ? i : mask_.query_positions[i];
    int64_t first_position =
        mask_.document_start.empty() ? 0 : mask_.document_start[b * s_.seq + i];
    if (mask_.window >= 0) first_position = std::max(first_position, query_position - mask_.window);
    begin_ = FirstKeyAtOrAfter(first_position);
    end_ = std::max(begin_, FirstKeyAtOrAfter(query_position + 1));
    dropout_base_ = static_cast<uint64_t>(
        (((dropout_.first_sample + b) * dropout_.total_heads + dropout_.first_head + h) * length_ +
         query_position) *
        length_);
  }
  // The selected row's visible key rows, clipped to [lo, hi).
  int64_t begin(int64_t lo) const { return std::max(begin_, lo); }
  int64_t end(int64_t hi) const { return std::min(end_, hi); }
  int64_t KeyPosition(int64_t j) const {
    return mask_.key_positions.empty() ? j : mask_.key_positions[j];
  }
  bool has_dropout() const { return dropout_.rng != nullptr && dropout_.p > 0.0f; }
  // in[j] * keep(first + j) / (1 - p) for `count` keys of the row from key `first`.
  void Dropout(int64_t first, int64_t count, const float* in, float* out) const {
    const float keep_scale = 1.0f / (1.0f - dropout_.p);
    for (int64_t j = 0; j < count; ++j) {
      const uint64_t index = dropout_base_ + static_cast<uint64_t>(KeyPosition(first + j));
      out[j] = dropout_.rng->Uniform(index) >= dropout_.p ? in[j] * keep_scale : 0.0f;
    }
  }

 private:
  int64_t FirstKeyAtOrAfter(int64_t position) const {
    if (mask_.key_positions.empty()) return std::clamp<int64_t>(position, 0, key_rows_);
    return std::lower_bound(mask_.key_positions.begin(), mask_.key_positions.end(), position) -
           mask_.key_positions.begin();
  }

  const AttentionShape& s_;
  int64_t key_rows_;
  const AttentionMask& mask_;
  const AttentionDropout& dropout_;
  int64_t length_;
  int64_t begin_ = 0, end_ = 0;
  uint64_t dropout_base_ = 0;
};

// The query rows [rows_begin, rows_end) and keys [keys_begin, keys_end) outside which no
// query of any sample sees any key: only this rectangle is computed. Under context
// parallelism's chunk layout (queries in chunks r and 2CP-1-r, keys in chunks s and
// 2CP-1-s) it is half of every block but the rank's own: for s < r both query chunks see
// only the first key chunk, for s > r only the late query chunk sees any key. So the
// causal mask's work is skipped rather than computed and masked (Megatron does the same);
// a block wholly outside a sliding window is empty and skipped.
struct VisibleRectangle {
  int64_t rows_begin, rows_end, keys_begin, keys_end;
  bool empty() const { return rows_begin >= rows_end; }
};

// The rectangle of sample b's query rows [first_row, last_row) (per sample, so that a
// tile of rows inside one document computes that document's keys alone).
VisibleRectangle VisibleOf(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
                           int64_t b, int64_t first_row, int64_t last_row) {
  VisibleRectangle r{last_row, first_row, key_rows, 0};
  RowMask rows(s, key_rows, mask, AttentionDropout{});
  for (int64_t i = first_row; i < last_row; ++i) {
    rows.Select(b, 0, i);
    const int64_t begin = rows.begin(0), end = rows.end(key_rows);
    if (begin >= end) continue;
    r.rows_begin = std::min(r.rows_begin, i);
    r.rows_end = std::max(r.rows_end, i + 1);
    r.keys_begin = std::min(r.keys_begin, begin);
    r.keys_end = std::max(r.keys_end, end);
  }
  return r;
}

// Query rows per tile. A tile computes only the keys its rows can see, so under the
// causal mask the tiles skip the blocks above the diagonal (all but a tile's width of
// the diagonal: 6% more products than the triangle at seq 256) and under a sliding
// window all but about tile + window keys per row. Rows are independent, so tiling
// changes no row's result beyond the summation order of the value product. The tile
// products (attention_tiles.h) cost little per call, so tiles can be this small; a
// tile's scores (16 rows by at most a few hundred keys) then stay in L1. Measured on
// Zen 4 (one layer of the benchmark's model), 16 rows ran 4-5% faster than 32 or 24,
// and 12 or 8 no faster.
constexpr int64_t kRowTile = 16;

// The query rows [first_row, last_row) computed apart, and the rectangle they see.
struct RowTile {
  int64_t first_row, last_row;
  VisibleRectangle box;
};

// tiles[b]: sample b's tiles.
std::vector<std::vector<RowTile>> RowTiles(const AttentionShape& s, int64_t key_rows,
                                           const AttentionMask& mask) {
  std::vector<std::vector<RowTile>> tiles(s.batch);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.seq; i += kRowTile) {
      const int64_t last = std::min(s.seq, i + kRowTile);
      tiles[b].push_back({i, last, VisibleOf(s, key_rows, mask, b, i, last)});
    }
  }
  return tiles;
}

// The row passes below are vectorised (vector_math.h); their sums and maxima take
// ReduceLanes' order.
CONVEYOR_VECTOR_CLONES float RowMax(const float* p, int64_t n) {
  return ReduceLanes(
      n, kNegInf, [](float a, float b) { return a > b ? a : b; }, [p](int64_t j) { return p[j]; });
}

CONVEYOR_VECTOR_CLONES float Dot(const float* a, const float* b, int64_t n) {
  return ReduceLanes(
      n, 0.0f, [](float x, float y) { return x + y; }, [a, b](int64_t j) { return a[j] * b[j]; });
}

// p[j] = exp(p[j] - shift) for j in [0, n); returns their sum.
CONVEYOR_VECTOR_CLONES float ExpShiftedSum(float* p, int64_t n, float shift) {
  MapLanes(n, p, [p, shift](int64_t j) { return Exp(p[j] - shift); });
  return ReduceLanes(
      n, 0.0f, [](float x, float y) { return x + y; }, [p](int64_t j) { return p[j]; });
}

// p[j] *= factor for j in [0, n).
CONVEYOR_VECTOR_CLONES void Scale(float* p, int64_t n, float factor) {
  MapLanes(n, p, [p, factor](int64_t j) { return p[j] * factor; });
}

// p[j] = exp(p[j] - lse); d[j] = p[j] * (d[j] - D): a row of the softmax's backward,
// dS = P o (dP - D), D = dO . O given in *dot, or, when dot is null, D = sum_j P[j] dP[j]:
// the same sum when the row's keys are all here (O = P' V, so dO . O = sum_j P'[j] dP'[j],
// and P' dP' = P dP key by key, dropout's factor moved from P to dP).
CONVEYOR_VECTOR_CLONES void SoftmaxRowGrad(float* p, float* d, int64_t n, float lse,
                                           const float* dot) {
  MapLanes(n, p, [p, lse](int64_t j) { return Exp(p[j] - lse); });
  const float row_dot = dot != nullptr ? *dot
                                       : ReduceLanes(
                                             n, 0.0f, [](float x, float y) { return x + y; },
                                             [p, d](int64_t j) { return p[j] * d[j]; });
  MapLanes(n, d, [p, d, row_dot](int64_t j) { return p[j] * (d[j] - row_dot); });
}

}  // namespace

void PackKeysValues(const AttentionShape& s, const float* qkv, float* kv) {
  const int64_t ld = s.qkv_width(), kvw = s.kv_width();
  for (int64_t r = 0; r < s.batch * s.seq; ++r) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const HeadView v = View(s, g * s.heads_per_group);
      std::memcpy(kv + r * kvw + v.k_offset, qkv + r * ld + v.fused_k_offset,
                  sizeof(float) * (s.head_dim + s.value_dim()));
    }
  }
}

void AddKeyValueGrad(const AttentionShape& s, const float* dkv, float* dqkv) {
  const int64_t ld = s.qkv_width(), kvw = s.kv_width();
  for (int64_t r = 0; r < s.batch * s.seq; ++r) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const HeadView v = View(s, g * s.heads_per_group);
      const float* from = dkv + r * kvw + v.k_offset;
      float* to = dqkv + r * ld + v.fused_k_offset;
      for (int64_t c = 0; c < s.head_dim + s.value_dim(); ++c) to[c] += from[c];
    }
  }
}

namespace {

// One call's operands, shared by its tasks. The keys and values lie in rows kv_ld
// apart: packed (PackKeysValues) or, for the whole sample, inside the fused qkv rows
// (no copy); the gradients dK and dV are written in the same layout. whole_sample: the
// block holds every key its rows see, in qkv.
struct BlockInputs {
  const AttentionShape& s;
  int64_t key_rows;
  const AttentionMask& mask;
  const float* qkv;
  const float* kv;
  float scale;
  const AttentionDropout& dropout;
  bool whole_sample = false;

  int64_t kv_ld() const { return whole_sample ? s.qkv_width() : s.kv_width(); }
  // The key head of query head h's group in a row of kv (its value head follows).
  int64_t KeyOffset(int64_t h) const {
    const HeadView v = View(s, h);
    return whole_sample ? v.fused_k_offset : v.k_offset;
  }
};

// Row i's scores p (the rectangle's `keys` columns) become its share of the merged
// result: p = exp(S - new_lse) on the row's visible keys (then dropout), 0 elsewhere;
// out_row (dv wide) is rescaled by exp(old_lse - new_lse), for the value product to add
// p V to; row_lse = new_lse.
void MergeRow(const RowMask& rows, const VisibleRectangle& box, int64_t keys, bool first, float* p,
              float* out_row, int64_t dv, float* row_lse) {
  // The row's visible keys, as offsets into the rectangle's columns.
  const int64_t lo = rows.begin(box.keys_begin) - box.keys_begin;
  const int64_t hi = rows.end(box.keys_end) - box.keys_begin;
  if (lo >= hi) {  // nothing visible in this block: the row is unchanged
    std::fill(p, p + keys, 0.0f);
    if (first) {
      *row_lse = kNegInf;
      std::fill(out_row, out_row + dv, 0.0f);
    }
    return;
  }
  const float old_lse = first ? kNegInf : *row_lse;
  const float max = RowMax(p + lo, hi - lo);
  const float sum = ExpShiftedSum(p + lo, hi - lo, max);
  const float block_lse = max + std::log(sum);
  const float new_lse = old_lse == kNegInf
                            ? block_lse
                            : std::max(old_lse, block_lse) +
                                  std::log1p(std::exp(-std::fabs(old_lse - block_lse)));
  const float keep_old = old_lse == kNegInf ? 0.0f : std::exp(old_lse - new_lse);
  // exp(s - new_lse) = exp(s - max) * exp(max - new_lse): one exp per score.
  const float rescale = std::exp(max - new_lse);
  std::fill(p, p + lo, 0.0f);
  Scale(p + lo, hi - lo, rescale);
  std::fill(p + hi, p + keys, 0.0f);
  if (rows.has_dropout()) rows.Dropout(box.keys_begin + lo, hi - lo, p + lo, p + lo);
  if (keep_old == 0.0f) {  // not the product: out_row may hold anything (NaN) when first
    std::fill(out_row, out_row + dv, 0.0f);
  } else {
    Scale(out_row, dv, keep_old);
  }
  *row_lse = new_lse;
}

// One task's keys and values transposed (TransposeRows): kt [head_dim, key_rows] and vt
// [value_dim, key_rows], the B operands of Q K^T and dO V^T.
struct TransposedKeys {
  std::vector<float> kt, vt;
};

// Sample b's keys (and values when `values`) of the group of query head h.
void TransposeKeys(const BlockInputs& in, int64_t b, int64_t h, bool values, TransposedKeys& t) {
  const AttentionShape& s = in.s;
  const int64_t kvw = in.kv_ld();
  const float* k = in.kv + b * in.key_rows * kvw + in.KeyOffset(h);
  t.kt.resize(s.head_dim * in.key_rows);
  TransposeRows(in.key_rows, s.head_dim, k, kvw, t.kt.data());
  if (!values) return;
  t.vt.resize(s.value_dim() * in.key_rows);
  TransposeRows(in.key_rows, s.value_dim(), k + s.head_dim, kvw, t.vt.data());
}

// scores [m, keys] = scale Q K^T for the rectangle's rows and keys (q: its first row's
// query head).
void Scores(const BlockInputs& in, const VisibleRectangle& box, const float* q,
            const TransposedKeys& t, float* scores) {
  const int64_t keys = box.keys_end - box.keys_begin;
  TileGemm({box.rows_end - box.rows_begin, keys, in.s.head_dim, in.scale, q, in.s.qkv_width(), 1,
            t.kt.data() + box.keys_begin, in.key_rows, scores, keys, /*accumulate=*/false});
}

// AttentionBlockForward for query head h of sample b, the rows of `tile`; t: the head's
// keys (TransposeKeys). scores: room for the tile's rectangle.
void ForwardTile(const BlockInputs& in, const RowTile& tile, int64_t b, int64_t h,
                 const TransposedKeys& t, bool first, float* scores, float* ctx, float* lse) {
  const AttentionShape& s = in.s;
  const int64_t ld = s.qkv_width(), kvw = in.kv_ld();
  const int64_t ld_ctx = s.context_width(), dv = s.value_dim();
  const VisibleRectangle& box = tile.box;
  const int64_t keys = box.keys_end - box.keys_begin;  // computed per row
  const HeadView v = View(s, h);
  const float* q_rows = in.qkv + b * s.seq * ld;
  const float* kv_rows = in.kv + (b * in.key_rows + box.keys_begin) * kvw;
  float* out = ctx + b * s.seq * ld_ctx + h * dv;
  float* row_lse = lse + (b * s.heads() + h) * s.seq;
  for (int64_t i = tile.first_row; i < tile.last_row && first; ++i) {  // nothing visible yet
    if (i >= box.rows_begin && i < box.rows_end) continue;
    row_lse[i] = kNegInf;
    std::fill(out + i * ld_ctx, out + i * ld_ctx + dv, 0.0f);
  }
  if (box.empty()) return;
  Scores(in, box, q_rows + box.rows_begin * ld + v.q_offset, t, scores);
  RowMask rows(s, in.key_rows, in.mask, in.dropout);
  for (int64_t i = box.rows_begin; i < box.rows_end; ++i) {
    rows.Select(b, h, i);
    MergeRow(rows, box, keys, first, scores + (i - box.rows_begin) * keys, out + i * ld_ctx, dv,
             row_lse + i);
  }
  TileGemm({box.rows_end - box.rows_begin, dv, keys, 1.0f, scores, keys, 1,
            kv_rows + in.KeyOffset(h) + s.head_dim, kvw, out + box.rows_begin * ld_ctx, ld_ctx,
            /*accumulate=*/true});
}

// Row i of the softmax's backward over the rectangle's `keys` columns: p = P' (the
// dropped-out probabilities, for dV) and d = dS, both 0 on keys the row does not see.
// p holds S and d holds dP' on entry; dot: D = dO . O, or null (SoftmaxRowGrad).
void SoftmaxGradRow(const RowMask& rows, const VisibleRectangle& box, int64_t keys, float lse,
                    const float* dot, float* p, float* d) {
  const int64_t lo = rows.begin(box.keys_begin) - box.keys_begin;
  const int64_t hi = std::max(lo, rows.end(box.keys_end) - box.keys_begin);
  std::fill(p, p + lo, 0.0f);
  std::fill(p + hi, p + keys, 0.0f);
  std::fill(d, d + lo, 0.0f);  // dS is 0 where a key is unseen
  std::fill(d + hi, d + keys, 0.0f);
  if (rows.has_dropout()) {
    rows.Dropout(box.keys_begin + lo, hi - lo, d + lo, d + lo);  // dP = dropout(dP')
  }
  SoftmaxRowGrad(p + lo, d + lo, hi - lo, lse, dot);
  if (rows.has_dropout()) rows.Dropout(box.keys_begin + lo, hi - lo, p + lo, p + lo);
}

// AttentionBlockBackward for query head h of sample b, the rows of `tile`; t: the
// head's keys and values (TransposeKeys). probs, dp: room for the tile's rectangle each.
void BackwardTile(const BlockInputs& in, const RowTile& tile, int64_t b, int64_t h,
                  const TransposedKeys& t, const float* ctx, const float* lse, const float* dctx,
                  float* probs, float* dp, float* dqkv, float* dkv) {
  const AttentionShape& s = in.s;
  const int64_t ld = s.qkv_width(), kvw = in.kv_ld();
  const int64_t ld_ctx = s.context_width(), dv = s.value_dim();
  const VisibleRectangle& box = tile.box;
  if (box.empty()) return;
  const int64_t m = box.rows_end - box.rows_begin, keys = box.keys_end - box.keys_begin;
  const HeadView v = View(s, h);
  const float* q_rows = in.qkv + (b * s.seq + box.rows_begin) * ld;
  const float* kv_rows = in.kv + (b * in.key_rows + box.keys_begin) * kvw;
  float* dq_rows = dqkv + (b * s.seq + box.rows_begin) * ld;
  float* dkv_rows = dkv + (b * in.key_rows + box.keys_begin) * kvw;
  const float* out = ctx + (b * s.seq + box.rows_begin) * ld_ctx + h * dv;
  const float* dout = dctx + (b * s.seq + box.rows_begin) * ld_ctx + h * dv;
  const float* row_lse = lse + (b * s.heads() + h) * s.seq;
  Scores(in, box, q_rows + v.q_offset, t, probs);
  // dP' = dO V^T
  TileGemm({m, keys, dv, 1.0f, dout, ld_ctx, 1, t.vt.data() + box.keys_begin, in.key_rows, dp, keys,
            /*accumulate=*/false});
  RowMask rows(s, in.key_rows, in.mask, in.dropout);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t i = box.rows_begin + r;
    rows.Select(b, h, i);
    // D = dO . O, unless the row's keys are all here (SoftmaxRowGrad): O is then not read.
    const float row_dot = in.whole_sample ? 0.0f : Dot(dout + r * ld_ctx, out + r * ld_ctx, dv);
    SoftmaxGradRow(rows, box, keys, row_lse[i], in.whole_sample ? nullptr : &row_dot,
                   probs + r * keys, dp + r * keys);
  }
  // dV += P'^T dO ; dQ += scale dS K ; dK += scale dS^T Q
  const int64_t k_offset = in.KeyOffset(h);
  TileGemm({keys, dv, m, 1.0f, probs, 1, keys, dout, ld_ctx, dkv_rows + k_offset + s.head_dim, kvw,
            /*accumulate=*/true});
  TileGemm({m, s.head_dim, keys, in.scale, dp, keys, 1, kv_rows + k_offset, kvw,
            dq_rows + v.q_offset, ld, /*accumulate=*/true});
  TileGemm({keys, s.head_dim, m, in.scale, dp, 1, keys, q_rows + v.q_offset, ld,
            dkv_rows + k_offset, kvw, /*accumulate=*/true});
}

// Each (sample, head) is a task of its own on the pool's threads: it writes its own
// rows of ctx and lse, so the split changes no result.
void BlockForward(const BlockInputs& in, bool first, float* ctx, float* lse) {
  const AttentionShape& s = in.s;
  const std::vector<std::vector<RowTile>> tiles = RowTiles(s, in.key_rows, in.mask);
  ParallelForSerialGemm(s.batch * s.heads(), [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kRowTile * in.key_rows);
    TransposedKeys keys;
    int64_t keys_of = -1;  // the (sample, group) whose keys `keys` holds
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / s.heads(), h = t % s.heads();
      const int64_t group = t / s.heads_per_group;  // heads of a group are consecutive tasks
      if (group != keys_of) TransposeKeys(in, b, h, /*values=*/false, keys);
      keys_of = group;
      for (const RowTile& tile : tiles[b]) {
        ForwardTile(in, tile, b, h, keys, first, scores.data(), ctx, lse);
      }
    }
  });
}

// Each (sample, key/value group) is a task: the group's heads add into the same dK and
// dV rows, in the order of the single-threaded loop (tiles, then the group's heads), so
// the split changes no result. `zero`: each task first zeroes its sample's rows of its
// group's columns of dqkv (with the keys and values fused, the tasks cover dqkv).
void BlockBackward(const BlockInputs& in, const float* ctx, const float* lse, const float* dctx,
                   bool zero, float* dqkv, float* dkv) {
  const AttentionShape& s = in.s;
  const std::vector<std::vector<RowTile>> tiles = RowTiles(s, in.key_rows, in.mask);
  ParallelForSerialGemm(s.batch * s.groups, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(kRowTile * in.key_rows), dp(kRowTile * in.key_rows);
    TransposedKeys keys;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / s.groups, g = t % s.groups, first_head = g * s.heads_per_group;
      for (int64_t r = b * s.seq; r < (b + 1) * s.seq && zero; ++r) {
        float* row = dqkv + r * s.qkv_width() + g * s.group_width();
        std::fill(row, row + s.group_width(), 0.0f);
      }
      TransposeKeys(in, b, first_head, /*values=*/true, keys);
      for (const RowTile& tile : tiles[b]) {
        for (int64_t h = first_head; h < first_head + s.heads_per_group; ++h) {
          BackwardTile(in, tile, b, h, keys, ctx, lse, dctx, probs.data(), dp.data(), dqkv, dkv);
        }
      }
    }
  });
}

}  // namespace

void AttentionBlockForward(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
                           const float* qkv, const float* kv, float scale,
                           const AttentionDropout& dropout, bool first, float* ctx, float* lse) {
  BlockForward({s, key_rows, mask, qkv, kv, scale, dropout}, first, ctx, lse);
}

void AttentionBlockBackward(const AttentionShape& s, int64_t key_rows, const AttentionMask& mask,
                            const float* qkv, const float* kv, const float* ctx, const float* lse,
                            const float* dctx, float scale, const AttentionDropout& dropout,
                            float* dqkv, float* dkv) {
  BlockBackward({s, key_rows, mask, qkv, kv, scale, dropout}, ctx, lse, dctx, /*zero=*/false, dqkv,
                dkv);
}

// The whole sample reads its keys and values inside qkv and adds dK and dV into dqkv.
void AttentionForward(const AttentionShape& s, const AttentionMask& mask, const float* qkv,
                      float scale, const AttentionDropout& dropout, float* lse, float* ctx) {
  BlockForward({s, s.seq, mask, qkv, qkv, scale, dropout, /*whole_sample=*/true}, /*first=*/true,
               ctx, lse);
}

void AttentionBackward(const AttentionShape& s, const AttentionMask& mask, const float* qkv,
                       const float* lse, const float* ctx, const float* dctx, float scale,
                       const AttentionDropout& dropout, float* dqkv) {
  BlockBackward({s, s.seq, mask, qkv, qkv, scale, dropout, /*whole_sample=*/true}, ctx, lse, dctx,
                /*zero=*/true, dqkv, dqkv);
}

}  // namespace conveyor::cpu
