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

// Rows of scores and probabilities (and the transposed keys' rows) lie ScoreLd(keys)
// floats apart: a stride that is not a power of two, so that a column's lines (read down
// the rows by the products) do not all fall in the same few sets of L1, and room past
// the keys for the backward's rows to be processed in whole blocks of kLanes (PadRow).
int64_t ScoreLd(int64_t keys) { return keys + kLanes; }

// p[hi, end) = -inf, end = lo + (hi - lo) rounded up to kLanes; returns end - lo: a row
// of the backward's softmax with no scalar remainder (the rows' lengths vary with the
// causal mask, and the remainders cost about as much as the blocks; measured in the
// backward, 2-5% of it, while the forward's rows ran no faster). Exp clamps -inf to
// ~1.2e-38 (vector_math.h), zeroed with the unseen keys after.
int64_t PadRow(float* p, int64_t lo, int64_t hi) {
  const int64_t end = lo + (hi - lo + kLanes - 1) / kLanes * kLanes;
  std::fill(p + hi, p + end, kNegInf);
  return end - lo;
}

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
// [value_dim, key_rows], rows ScoreLd(key_rows) apart, the B operands of Q K^T and dO V^T.
struct TransposedKeys {
  std::vector<float> kt, vt;
};

// Sample b's keys (and values when `values`) of the group of query head h.
void TransposeKeys(const BlockInputs& in, int64_t b, int64_t h, bool values, TransposedKeys& t) {
  const AttentionShape& s = in.s;
  const int64_t kvw = in.kv_ld();
  const float* k = in.kv + b * in.key_rows * kvw + in.KeyOffset(h);
  t.kt.resize(s.head_dim * ScoreLd(in.key_rows));
  TransposeRows(in.key_rows, s.head_dim, k, kvw, t.kt.data(), ScoreLd(in.key_rows));
  if (!values) return;
  t.vt.resize(s.value_dim() * ScoreLd(in.key_rows));
  TransposeRows(in.key_rows, s.value_dim(), k + s.head_dim, kvw, t.vt.data(), ScoreLd(in.key_rows));
}

// scores [m, keys] (rows ldc apart) = scale Q K^T for the rectangle's rows and keys (q:
// its first row's query head).
void Scores(const BlockInputs& in, const VisibleRectangle& box, const float* q,
            const TransposedKeys& t, float* scores, int64_t ldc) {
  const int64_t keys = box.keys_end - box.keys_begin;
  TileGemm({box.rows_end - box.rows_begin, keys, in.s.head_dim, in.scale, q, in.s.qkv_width(), 1,
            t.kt.data() + box.keys_begin, ScoreLd(in.key_rows), scores, ldc,
            /*accumulate=*/false});
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
  const int64_t ld_p = ScoreLd(keys);
  Scores(in, box, q_rows + box.rows_begin * ld + v.q_offset, t, scores, ld_p);
  RowMask rows(s, in.key_rows, in.mask, in.dropout);
  for (int64_t i = box.rows_begin; i < box.rows_end; ++i) {
    rows.Select(b, h, i);
    MergeRow(rows, box, keys, first, scores + (i - box.rows_begin) * ld_p, out + i * ld_ctx, dv,
             row_lse + i);
  }
  TileGemm({box.rows_end - box.rows_begin, dv, keys, 1.0f, scores, ld_p, 1,
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
  if (rows.has_dropout()) {
    rows.Dropout(box.keys_begin + lo, hi - lo, d + lo, d + lo);  // dP = dropout(dP')
  }
  // Padded (PadRow): the pad's P is ~1e-38 and its dP 0, so it adds nothing to D.
  const int64_t padded = PadRow(p, lo, hi);
  std::fill(d + hi, d + lo + padded, 0.0f);
  SoftmaxRowGrad(p + lo, d + lo, padded, lse, dot);
  std::fill(p, p + lo, 0.0f);
  std::fill(p + hi, p + std::max(hi, keys), 0.0f);
  std::fill(d, d + lo, 0.0f);  // dS is 0 where a key is unseen
  std::fill(d + hi, d + std::max(hi, keys), 0.0f);
  if (rows.has_dropout()) rows.Dropout(box.keys_begin + lo, hi - lo, p + lo, p + lo);
}

// The backward runs over panels of query rows: each tile of the panel leaves its P' and
// dS rows in the panel (one row per query row, one column per key row), then dK and dV
// are computed a block of kKeyBlock keys at a time over all the panel's rows that see
// them,
//   dV[keys] = P'[rows, keys]^T dO[rows],  dK[keys] = scale dS[rows, keys]^T Q[rows],
// so each of those products sums over up to a panel of rows in registers and stores
// its block of dK or dV once, instead of a tile's 16 rows at a time with a read and a
// write of dK and dV after each. The panel (P' and dS, 8 bytes per row and key) is
// kept to 64 KiB, 32 rows at 256 keys: in the training step (where the layer's other
// products have left L2 cold) a panel of the whole sample (1 MiB at seq 256) ran about
// 5% slower than 16 rows at a time, 32 rows as fast; in attention_bench all three
// alike.
constexpr int64_t kPanelBytes = int64_t{1} << 16;
constexpr int64_t kKeyBlock = 16;

int64_t PanelRows(int64_t key_rows) {
  const int64_t rows = kPanelBytes / (2 * sizeof(float) * std::max<int64_t>(key_rows, 1));
  return std::max(kRowTile, rows / kRowTile * kRowTile);
}

// A panel's P' and dS, row r (query row first_row + r) at r * ld, column = key row.
struct Panel {
  int64_t first_row;
  int64_t ld;
  float* probs;
  float* dscores;
};

// Rows [begin, end) of the panel: the rows of the panel's tiles that see some key of
// [k0, k1) (an empty range when none does). Every row between them holds P' and dS on
// those keys (zeros where unseen): PanelColumns.
struct RowRange {
  int64_t begin, end;
};

RowRange RowsSeeing(const std::vector<RowTile>& tiles, int64_t k0, int64_t k1) {
  RowRange r{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  for (const RowTile& tile : tiles) {
    const VisibleRectangle& box = tile.box;
    if (box.empty() || box.keys_begin >= k1 || box.keys_end <= k0) continue;
    r.begin = std::min(r.begin, box.rows_begin);
    r.end = std::max(r.end, box.rows_end);
  }
  return r.begin < r.end ? r : RowRange{0, 0};
}

// The keys [lo, hi) whose blocks read the rows of `tile` (key_blocks: RowsSeeing of each
// block): the columns the tile's rows must hold in the panel.
RowRange PanelColumns(const RowTile& tile, const std::vector<RowRange>& key_blocks,
                      int64_t key_rows) {
  RowRange c{key_rows, 0};
  for (int64_t k = 0; k < static_cast<int64_t>(key_blocks.size()); ++k) {
    const RowRange& r = key_blocks[k];
    if (r.begin >= tile.last_row || r.end <= tile.first_row) continue;
    c.begin = std::min(c.begin, k * kKeyBlock);
    c.end = std::max(c.end, std::min(key_rows, (k + 1) * kKeyBlock));
  }
  return c;
}

// Zeros in the panel on the columns `need` of the tile's rows that its rectangle does
// not cover (rows outside it, keys left or right of it): the key blocks' sums read them.
void ZeroOutsideBox(const RowTile& tile, const RowRange& need, const Panel& panel) {
  const VisibleRectangle& box = tile.box;
  for (int64_t i = tile.first_row; i < tile.last_row && need.begin < need.end; ++i) {
    const bool inside = !box.empty() && i >= box.rows_begin && i < box.rows_end;
    const int64_t left = inside ? std::max(need.begin, box.keys_begin) : need.end;
    const int64_t right = inside ? std::min(need.end, box.keys_end) : need.end;
    for (float* m : {panel.probs, panel.dscores}) {
      float* row = m + (i - panel.first_row) * panel.ld;
      std::fill(row + need.begin, row + left, 0.0f);
      std::fill(row + std::max(left, right), row + need.end, 0.0f);
    }
  }
}

// Per-call constants of the backward (with BlockInputs): ctx, lse, dctx, and whether
// this call overwrites dqkv's query heads (`zero`: the whole sample) or adds to them.
struct BackwardArgs {
  const float* ctx;
  const float* lse;
  const float* dctx;
  bool zero;
  float* dqkv;
  float* dkv;
};

// The rows of `tile` for query head h of sample b: P' and dS into the panel (columns
// `need`, PanelColumns), and dQ (+)= scale dS K. t: the head's keys and values
// (TransposeKeys).
void BackwardTile(const BlockInputs& in, const BackwardArgs& a, const RowTile& tile, int64_t b,
                  int64_t h, const TransposedKeys& t, const RowRange& need, const Panel& panel) {
  const AttentionShape& s = in.s;
  const int64_t ld = s.qkv_width(), kvw = in.kv_ld();
  const int64_t ld_ctx = s.context_width(), dv = s.value_dim();
  const VisibleRectangle& box = tile.box;
  const HeadView v = View(s, h);
  for (int64_t i = tile.first_row; i < tile.last_row && a.zero; ++i) {  // dQ of unseen rows
    if (!box.empty() && i >= box.rows_begin && i < box.rows_end) continue;
    float* dq = a.dqkv + (b * s.seq + i) * ld + v.q_offset;
    std::fill(dq, dq + s.head_dim, 0.0f);
  }
  if (box.empty()) return ZeroOutsideBox(tile, need, panel);
  const int64_t m = box.rows_end - box.rows_begin, keys = box.keys_end - box.keys_begin;
  const int64_t at = (box.rows_begin - panel.first_row) * panel.ld + box.keys_begin;
  float* probs = panel.probs + at;
  float* dp = panel.dscores + at;
  const float* q_rows = in.qkv + (b * s.seq + box.rows_begin) * ld;
  const int64_t ctx_at = (b * s.seq + box.rows_begin) * ld_ctx + h * dv;
  const float* row_lse = a.lse + (b * s.heads() + h) * s.seq;
  Scores(in, box, q_rows + v.q_offset, t, probs, panel.ld);
  // dP' = dO V^T
  TileGemm({m, keys, dv, 1.0f, a.dctx + ctx_at, ld_ctx, 1, t.vt.data() + box.keys_begin,
            ScoreLd(in.key_rows), dp, panel.ld, /*accumulate=*/false});
  RowMask rows(s, in.key_rows, in.mask, in.dropout);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t i = box.rows_begin + r;
    rows.Select(b, h, i);
    // D = dO . O, unless the row's keys are all here (SoftmaxRowGrad): O is then not read.
    const float* dout = a.dctx + ctx_at + r * ld_ctx;
    const float row_dot = in.whole_sample ? 0.0f : Dot(dout, a.ctx + ctx_at + r * ld_ctx, dv);
    SoftmaxGradRow(rows, box, keys, row_lse[i], in.whole_sample ? nullptr : &row_dot,
                   probs + r * panel.ld, dp + r * panel.ld);
  }
  ZeroOutsideBox(tile, need, panel);  // after the rows, whose pads (PadRow) may reach past
  // dQ (+)= scale dS K
  TileGemm({m, s.head_dim, keys, in.scale, dp, panel.ld, 1,
            in.kv + (b * in.key_rows + box.keys_begin) * kvw + in.KeyOffset(h), kvw,
            a.dqkv + (b * s.seq + box.rows_begin) * ld + v.q_offset, ld,
            /*accumulate=*/!a.zero});
}

// dV (+)= P'^T dO and dK (+)= scale dS^T Q for the keys [k0, k1) of sample b, query head
// h, over the panel's rows `rows` that see them. `write`: the first sum into dK and dV
// (it overwrites them, zeros where no row sees the keys).
void KeyBlockGrads(const BlockInputs& in, const BackwardArgs& a, int64_t b, int64_t h, int64_t k0,
                   int64_t k1, const RowRange& rows, const Panel& panel, bool write) {
  const AttentionShape& s = in.s;
  const int64_t ld = s.qkv_width(), kvw = in.kv_ld(), dv = s.value_dim();
  float* dk = a.dkv + (b * in.key_rows + k0) * kvw + in.KeyOffset(h);
  if (rows.begin >= rows.end) {
    for (int64_t j = 0; j < k1 - k0 && write; ++j) {
      std::fill(dk + j * kvw, dk + j * kvw + s.head_dim + dv, 0.0f);
    }
    return;
  }
  const int64_t at = (rows.begin - panel.first_row) * panel.ld + k0;
  const int64_t n_rows = rows.end - rows.begin;
  const float* dout = a.dctx + (b * s.seq + rows.begin) * s.context_width() + h * dv;
  const float* q = in.qkv + (b * s.seq + rows.begin) * ld + View(s, h).q_offset;
  TileGemm({k1 - k0, dv, n_rows, 1.0f, panel.probs + at, 1, panel.ld, dout, s.context_width(),
            dk + s.head_dim, kvw, /*accumulate=*/!write});
  TileGemm({k1 - k0, s.head_dim, n_rows, in.scale, panel.dscores + at, 1, panel.ld, q, ld, dk, kvw,
            /*accumulate=*/!write});
}

// Query head h of sample b over the panel of `tiles`. first_sum: the first sum into the
// sample's dK and dV (the whole sample's first head and panel).
void BackwardPanel(const BlockInputs& in, const BackwardArgs& a, const std::vector<RowTile>& tiles,
                   int64_t b, int64_t h, const TransposedKeys& t, const Panel& panel,
                   bool first_sum) {
  std::vector<RowRange> key_blocks;
  for (int64_t k0 = 0; k0 < in.key_rows; k0 += kKeyBlock) {
    key_blocks.push_back(RowsSeeing(tiles, k0, std::min(in.key_rows, k0 + kKeyBlock)));
  }
  for (const RowTile& tile : tiles) {
    BackwardTile(in, a, tile, b, h, t, PanelColumns(tile, key_blocks, in.key_rows), panel);
  }
  for (int64_t k = 0; k < static_cast<int64_t>(key_blocks.size()); ++k) {
    const int64_t k0 = k * kKeyBlock;
    KeyBlockGrads(in, a, b, h, k0, std::min(in.key_rows, k0 + kKeyBlock), key_blocks[k], panel,
                  first_sum);
  }
}

// Each (sample, head) is a task of its own on the pool's threads: it writes its own
// rows of ctx and lse, so the split changes no result.
void BlockForward(const BlockInputs& in, bool first, float* ctx, float* lse) {
  const AttentionShape& s = in.s;
  const std::vector<std::vector<RowTile>> tiles = RowTiles(s, in.key_rows, in.mask);
  ParallelForSerialGemm(s.batch * s.heads(), [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kRowTile * ScoreLd(in.key_rows));
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
// dV rows, in the order of the single-threaded loop (heads, then panels), so the split
// changes no result. `zero` (the whole sample, dK and dV fused into dqkv): the task's
// sums overwrite its sample's rows of its group's columns of dqkv instead of adding.
void BlockBackward(const BlockInputs& in, const BackwardArgs& a) {
  const AttentionShape& s = in.s;
  const std::vector<std::vector<RowTile>> tiles = RowTiles(s, in.key_rows, in.mask);
  const int64_t panel_tiles = PanelRows(in.key_rows) / kRowTile;
  ParallelForSerialGemm(s.batch * s.groups, [&](int64_t begin, int64_t end) {
    const int64_t panel_rows = std::min(s.seq, panel_tiles * kRowTile);
    std::vector<float> probs(panel_rows * ScoreLd(in.key_rows)), dscores(probs.size());
    TransposedKeys keys;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / s.groups, first_head = t % s.groups * s.heads_per_group;
      TransposeKeys(in, b, first_head, /*values=*/true, keys);
      for (int64_t h = first_head; h < first_head + s.heads_per_group; ++h) {
        for (size_t p = 0; p < tiles[b].size(); p += panel_tiles) {
          const std::vector<RowTile> part(
              tiles[b].begin() + p,
              tiles[b].begin() + std::min(tiles[b].size(), p + panel_tiles));
          const Panel panel{part.front().first_row, ScoreLd(in.key_rows), probs.data(),
                            dscores.data()};
          BackwardPanel(in, a, part, b, h, keys, panel, a.zero && h == first_head && p == 0);
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
  BlockBackward({s, key_rows, mask, qkv, kv, scale, dropout},
                {ctx, lse, dctx, /*zero=*/false, dqkv, dkv});
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
  BlockBackward({s, s.seq, mask, qkv, qkv, scale, dropout, /*whole_sample=*/true},
                {ctx, lse, dctx, /*zero=*/true, dqkv, dqkv});
}

}  // namespace conveyor::cpu
