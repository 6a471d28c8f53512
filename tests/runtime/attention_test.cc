// The CPU attention (runtime/cpu/attention.h) against a float64 reference written here
// from the definition: causal attention by position, document masks, sliding windows
// (Megatron's --window-size (w, 0): a query at i sees keys i - w .. i), dropout drawn by
// global index; the whole sample in one block, split into key blocks in any order (ring
// attention's steps), and the gradients against finite differences of the reference.
#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/gemm.h"
#include "runtime/philox.h"

namespace conveyor::cpu {
namespace {

constexpr int64_t kBatch = 2, kGroups = 2, kPerGroup = 2, kHeadDim = 4, kSeq = 8;
constexpr float kScale = 0.5f;

AttentionShape Shape(int64_t seq) { return {kBatch, seq, kGroups, kPerGroup, kHeadDim}; }
int64_t Heads() { return kGroups * kPerGroup; }
int64_t Width() { return kGroups * (kPerGroup + 2) * kHeadDim; }

// Megatron's grouped layout, written out: group g's query heads, then its key, then its
// value head.
int64_t QueryColumn(int64_t h, int64_t c) {
  return (h / kPerGroup) * (kPerGroup + 2) * kHeadDim + (h % kPerGroup) * kHeadDim + c;
}
int64_t KeyColumn(int64_t h, int64_t c) {
  return (h / kPerGroup) * (kPerGroup + 2) * kHeadDim + kPerGroup * kHeadDim + c;
}
int64_t ValueColumn(int64_t h, int64_t c) { return KeyColumn(h, c) + kHeadDim; }

struct Case {
  std::vector<int32_t> document_start;  // [batch * seq] or empty
  float dropout = 0.0f;
  int64_t window = -1;  // keys i - window .. i; -1: all earlier keys
};

// ctx[b, i, h, :] of the whole sample (seq tokens) in float64: sum over visible j of
// keep(b, h, i, j) / (1 - p) * softmax_j(scale q_i . k_j) v_j.
std::vector<double> Reference(const std::vector<double>& qkv, const Case& c,
                              const CounterRng& rng, int64_t seq = kSeq) {
  std::vector<double> ctx(kBatch * seq * Heads() * kHeadDim, 0.0);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t h = 0; h < Heads(); ++h) {
      for (int64_t i = 0; i < seq; ++i) {
        int64_t first = c.document_start.empty() ? 0 : c.document_start[b * seq + i];
        if (c.window >= 0) first = std::max(first, i - c.window);
        std::vector<double> s(seq, -INFINITY);
        double max = -INFINITY;
        for (int64_t j = first; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < kHeadDim; ++d) {
            dot += qkv[(b * seq + i) * Width() + QueryColumn(h, d)] *
                   qkv[(b * seq + j) * Width() + KeyColumn(h, d)];
          }
          s[j] = kScale * dot;
          max = std::max(max, s[j]);
        }
        double sum = 0.0;
        for (int64_t j = first; j <= i; ++j) sum += std::exp(s[j] - max);
        for (int64_t j = first; j <= i; ++j) {
          double p = std::exp(s[j] - max) / sum;
          if (c.dropout > 0.0f) {
            const uint64_t index = ((b * Heads() + h) * seq + i) * seq + j;
            p = rng.Uniform(index) >= c.dropout ? p / (1.0 - c.dropout) : 0.0;
          }
          for (int64_t d = 0; d < kHeadDim; ++d) {
            ctx[(b * seq + i) * Heads() * kHeadDim + h * kHeadDim + d] +=
                p * qkv[(b * seq + j) * Width() + ValueColumn(h, d)];
          }
        }
      }
    }
  }
  return ctx;
}

std::vector<float> RandomQkv(int64_t seq = kSeq) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(kBatch * seq * Width());
  for (float& x : qkv) x = normal(gen);
  return qkv;
}

std::vector<double> Wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Sample 0: documents [0, 3) and [3, 8); sample 1: [0, 5), [5, 6), [6, 8).
std::vector<int32_t> TwoSampleDocuments() {
  return {0, 0, 0, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 5, 6, 6};
}

// Windows of 0 (a query sees itself alone), 1 and 2 keys back, alone, with documents
// and with dropout: under context parallelism some key blocks then lie wholly outside.
std::vector<Case> Cases() {
  return {{{}, 0.0f},
          {TwoSampleDocuments(), 0.0f},
          {{}, 0.3f},
          {TwoSampleDocuments(), 0.3f},
          {{}, 0.0f, 0},
          {{}, 0.0f, 2},
          {TwoSampleDocuments(), 0.0f, 1},
          {TwoSampleDocuments(), 0.3f, 2}};
}

AttentionMask WholeSampleMask(const Case& c) {
  AttentionMask mask;
  mask.document_start = c.document_start;
  mask.window = c.window;
  return mask;
}

AttentionDropout DropoutOf(const Case& c, const CounterRng* rng) {
  return {rng, c.dropout, /*first_sample=*/0, /*first_head=*/0, Heads(), kSeq};
}

TEST(CpuAttentionTest, WholeSampleMatchesReference) {
  const CounterRng rng(3, 11);
  const std::vector<float> qkv = RandomQkv();
  for (const Case& c : Cases()) {
    std::vector<float> ctx(kBatch * kSeq * Heads() * kHeadDim);
    std::vector<float> lse(kBatch * Heads() * kSeq);
    AttentionForward(Shape(kSeq), WholeSampleMask(c), qkv.data(), kScale, DropoutOf(c, &rng),
                     lse.data(), ctx.data());
    const std::vector<double> want = Reference(Wide(qkv), c, rng);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_NEAR(ctx[k], want[k], 1e-5)
          << "element " << k << " dropout " << c.dropout << " window " << c.window;
    }
  }
}

// A document's queries get exactly zero weight on other documents' keys: changing
// another document's values leaves their output bit for bit unchanged.
TEST(CpuAttentionTest, DocumentsDoNotSeeEachOther) {
  const std::vector<float> qkv = RandomQkv();
  AttentionMask mask;
  const std::vector<int32_t> documents = TwoSampleDocuments();
  mask.document_start = documents;
  auto run = [&](const std::vector<float>& in) {
    std::vector<float> ctx(kBatch * kSeq * Heads() * kHeadDim), lse(kBatch * Heads() * kSeq);
    AttentionForward(Shape(kSeq), mask, in.data(), kScale, {}, lse.data(), ctx.data());
    return ctx;
  };
  std::vector<float> changed = qkv;
  for (int64_t i = 0; i < 3; ++i) {  // sample 0's first document: keys and values
    for (int64_t h = 0; h < Heads(); ++h) {
      for (int64_t d = 0; d < kHeadDim; ++d) {
        changed[i * Width() + KeyColumn(h, d)] += 5.0f;
        changed[i * Width() + ValueColumn(h, d)] -= 3.0f;
      }
    }
  }
  const std::vector<float> before = run(qkv), after = run(changed);
  const int64_t row = Heads() * kHeadDim;
  for (int64_t k = 3 * row; k < kSeq * kBatch * row; ++k) ASSERT_EQ(before[k], after[k]) << k;
  EXPECT_NE(before[0], after[0]);  // the first document itself does change
}

// Context parallelism's layout: 2 ranks, chunks {0, 3} and {1, 2} of 2 tokens each.
std::vector<int32_t> RankPositions(int rank) {
  return rank == 0 ? std::vector<int32_t>{0, 1, 6, 7} : std::vector<int32_t>{2, 3, 4, 5};
}

// The rows of `rank` (its positions of each sample) of a [batch * seq, width] array.
template <typename T>
std::vector<T> RowsOf(const std::vector<T>& full, int rank, int64_t width) {
  std::vector<T> rows;
  if (full.empty()) return rows;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int32_t p : RankPositions(rank)) {
      rows.insert(rows.end(), full.begin() + (b * kSeq + p) * width,
                  full.begin() + (b * kSeq + p + 1) * width);
    }
  }
  return rows;
}

TEST(CpuAttentionTest, KeyBlocksInAnyOrderMatchReference) {
  const CounterRng rng(3, 11);
  const std::vector<float> qkv = RandomQkv();
  const int64_t local = kSeq / 2;
  const AttentionShape local_shape = Shape(local);
  for (const Case& c : Cases()) {
    const std::vector<double> want = Reference(Wide(qkv), c, rng);
    for (int rank = 0; rank < 2; ++rank) {
      const std::vector<float> my_qkv = RowsOf(qkv, rank, Width());
      const std::vector<int32_t> my_docs = RowsOf(c.document_start, rank, 1);
      const std::vector<int32_t> queries = RankPositions(rank);
      for (const std::vector<int>& order : {std::vector<int>{0, 1}, std::vector<int>{1, 0}}) {
        std::vector<float> ctx(kBatch * local * Heads() * kHeadDim);
        std::vector<float> lse(kBatch * Heads() * local);
        for (size_t step = 0; step < order.size(); ++step) {
          const int source = order[step];
          const std::vector<float> source_qkv = RowsOf(qkv, source, Width());
          std::vector<float> kv(kBatch * local * kGroups * 2 * kHeadDim);
          PackKeysValues(local_shape, source_qkv.data(), kv.data());
          const std::vector<int32_t> keys = RankPositions(source);
          const AttentionMask mask{queries, keys, my_docs, c.window};
          AttentionBlockForward(local_shape, local, mask, my_qkv.data(), kv.data(), kScale,
                                DropoutOf(c, &rng), /*first=*/step == 0, ctx.data(), lse.data());
        }
        const std::vector<double> want_rows = RowsOf(want, rank, Heads() * kHeadDim);
        for (size_t k = 0; k < want_rows.size(); ++k) {
          ASSERT_NEAR(ctx[k], want_rows[k], 1e-5) << "rank " << rank << " element " << k;
        }
      }
    }
  }
}

// d(sum ctx * w)/d(qkv) by central differences of the float64 reference.
std::vector<double> NumericGrad(const std::vector<float>& qkv, const std::vector<double>& w,
                                const Case& c, const CounterRng& rng) {
  std::vector<double> x = Wide(qkv), grad(x.size());
  const double eps = 1e-4;
  auto loss = [&] {
    const std::vector<double> ctx = Reference(x, c, rng);
    double l = 0.0;
    for (size_t k = 0; k < ctx.size(); ++k) l += ctx[k] * w[k];
    return l;
  };
  for (size_t k = 0; k < x.size(); ++k) {
    const double keep = x[k];
    x[k] = keep + eps;
    const double up = loss();
    x[k] = keep - eps;
    const double down = loss();
    x[k] = keep;
    grad[k] = (up - down) / (2 * eps);
  }
  return grad;
}

TEST(CpuAttentionTest, GradientsMatchFiniteDifferences) {
  const CounterRng rng(5, 2);
  const std::vector<float> qkv = RandomQkv();
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(kBatch * kSeq * Heads() * kHeadDim);
  for (float& x : w) x = normal(gen);
  for (const Case& c : Cases()) {
    const AttentionMask mask = WholeSampleMask(c);
    std::vector<float> ctx(w.size()), lse(kBatch * Heads() * kSeq), dqkv(qkv.size());
    AttentionForward(Shape(kSeq), mask, qkv.data(), kScale, DropoutOf(c, &rng), lse.data(),
                     ctx.data());
    AttentionBackward(Shape(kSeq), mask, qkv.data(), lse.data(), ctx.data(), w.data(), kScale,
                      DropoutOf(c, &rng), dqkv.data());
    const std::vector<double> want = NumericGrad(qkv, Wide(w), c, rng);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_NEAR(dqkv[k], want[k], 2e-4 * (1.0 + std::fabs(want[k])))
          << "element " << k << " dropout " << c.dropout;
    }
  }
}

// The blocks' backward shares, summed over the ring (each block's key/value gradient
// added to its owner's rows), equal the whole sample's gradient.
TEST(CpuAttentionTest, BlockGradientsSumToWholeSample) {
  const CounterRng rng(5, 2);
  const std::vector<float> qkv = RandomQkv();
  std::mt19937 gen(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(kBatch * kSeq * Heads() * kHeadDim);
  for (float& x : w) x = normal(gen);
  const int64_t local = kSeq / 2;
  const AttentionShape local_shape = Shape(local);
  const int64_t kv_width = kGroups * 2 * kHeadDim;
  for (const Case& c : Cases()) {
    const AttentionMask whole = WholeSampleMask(c);
    std::vector<float> ctx(w.size()), lse(kBatch * Heads() * kSeq), want(qkv.size());
    AttentionForward(Shape(kSeq), whole, qkv.data(), kScale, DropoutOf(c, &rng), lse.data(),
                     ctx.data());
    AttentionBackward(Shape(kSeq), whole, qkv.data(), lse.data(), ctx.data(), w.data(), kScale,
                      DropoutOf(c, &rng), want.data());
    // Per rank: its dqkv from every block, plus the key/value gradients its own block
    // collected from both ranks.
    std::vector<std::vector<float>> dqkv(2), dkv(2);
    for (int rank = 0; rank < 2; ++rank) {
      dqkv[rank].assign(kBatch * local * Width(), 0.0f);
      dkv[rank].assign(kBatch * local * kv_width, 0.0f);
    }
    for (int rank = 0; rank < 2; ++rank) {
      const std::vector<float> my_qkv = RowsOf(qkv, rank, Width());
      const std::vector<float> my_ctx = RowsOf(ctx, rank, Heads() * kHeadDim);
      const std::vector<float> my_dctx = RowsOf(w, rank, Heads() * kHeadDim);
      std::vector<float> my_lse(kBatch * Heads() * local);
      for (int64_t bh = 0; bh < kBatch * Heads(); ++bh) {
        for (int64_t i = 0; i < local; ++i) {
          my_lse[bh * local + i] = lse[bh * kSeq + RankPositions(rank)[i]];
        }
      }
      const std::vector<int32_t> my_docs = RowsOf(c.document_start, rank, 1);
      for (int source = 0; source < 2; ++source) {
        const std::vector<float> source_qkv = RowsOf(qkv, source, Width());
        std::vector<float> kv(kBatch * local * kv_width);
        PackKeysValues(local_shape, source_qkv.data(), kv.data());
        const std::vector<int32_t> queries = RankPositions(rank), keys = RankPositions(source);
        const AttentionMask mask{queries, keys, my_docs, c.window};
        AttentionBlockBackward(local_shape, local, mask, my_qkv.data(), kv.data(), my_ctx.data(),
                               my_lse.data(), my_dctx.data(), kScale, DropoutOf(c, &rng),
                               dqkv[rank].data(), dkv[source].data());
      }
    }
    for (int rank = 0; rank < 2; ++rank) {
      AddKeyValueGrad(local_shape, dkv[rank].data(), dqkv[rank].data());
      const std::vector<float> want_rows = RowsOf(want, rank, Width());
      for (size_t k = 0; k < want_rows.size(); ++k) {
        ASSERT_NEAR(dqkv[rank][k], want_rows[k], 1e-5) << "rank " << rank << " element " << k;
      }
    }
  }
}

// Sequences longer than a tile of query rows: each tile computes only the keys its
// window reaches, and the result is still the reference's, with the first tile's keys
// wholly outside the last tile's window.
TEST(CpuAttentionTest, LongSequenceWindowMatchesReference) {
  constexpr int64_t kLong = 300;
  const CounterRng rng(3, 11);
  const std::vector<float> qkv = RandomQkv(kLong);
  for (const int64_t window : {int64_t{0}, int64_t{37}, int64_t{150}}) {
    const Case c{{}, 0.0f, window};
    std::vector<float> ctx(kBatch * kLong * Heads() * kHeadDim), lse(kBatch * Heads() * kLong);
    AttentionForward(Shape(kLong), WholeSampleMask(c), qkv.data(), kScale, {}, lse.data(),
                     ctx.data());
    const std::vector<double> want = Reference(Wide(qkv), c, rng, kLong);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_NEAR(ctx[k], want[k], 1e-5) << "element " << k << " window " << window;
    }
  }
}

// The gradient of sum(ctx * dctx) in float64 from its closed form, no dropout: per query
// row, P = softmax over the visible keys, dP_j = dO . v_j, D = sum_j P_j dP_j,
// dS_j = P_j (dP_j - D); dq = scale sum_j dS_j k_j, dk_j += scale dS_j q, dv_j += P_j dO
// (the heads of a group adding into its one key and value head).
std::vector<double> ReferenceGrad(const std::vector<double>& qkv, const std::vector<double>& dctx,
                                  const Case& c, int64_t seq) {
  std::vector<double> grad(qkv.size(), 0.0);
  auto at = [&](int64_t b, int64_t i, int64_t column) { return (b * seq + i) * Width() + column; };
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t h = 0; h < Heads(); ++h) {
      for (int64_t i = 0; i < seq; ++i) {
        int64_t first = c.document_start.empty() ? 0 : c.document_start[b * seq + i];
        if (c.window >= 0) first = std::max(first, i - c.window);
        const double* dout = &dctx[((b * seq + i) * Heads() + h) * kHeadDim];
        std::vector<double> p(i + 1, 0.0), dp(i + 1, 0.0);
        double max = -INFINITY, sum = 0.0, dot = 0.0;
        for (int64_t j = first; j <= i; ++j) {
          for (int64_t d = 0; d < kHeadDim; ++d) {
            p[j] += kScale * qkv[at(b, i, QueryColumn(h, d))] * qkv[at(b, j, KeyColumn(h, d))];
            dp[j] += dout[d] * qkv[at(b, j, ValueColumn(h, d))];
          }
          max = std::max(max, p[j]);
        }
        for (int64_t j = first; j <= i; ++j) sum += std::exp(p[j] - max);
        for (int64_t j = first; j <= i; ++j) {
          p[j] = std::exp(p[j] - max) / sum;
          dot += p[j] * dp[j];
        }
        for (int64_t j = first; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - dot);
          for (int64_t d = 0; d < kHeadDim; ++d) {
            grad[at(b, i, QueryColumn(h, d))] += kScale * ds * qkv[at(b, j, KeyColumn(h, d))];
            grad[at(b, j, KeyColumn(h, d))] += kScale * ds * qkv[at(b, i, QueryColumn(h, d))];
            grad[at(b, j, ValueColumn(h, d))] += p[j] * dout[d];
          }
        }
      }
    }
  }
  return grad;
}

// Sequences of many tiles of query rows, backward: the key and value gradients are
// summed over every row that sees a key, across tiles whose rectangles differ (windows
// reaching back past a tile's first keys, documents starting inside tiles, two heads per
// group adding into one key head), and match the closed form; on one thread, whose
// buffers then serve both samples' differing documents, and on two.
TEST(CpuAttentionTest, LongSequenceGradientsMatchReference) {
  constexpr int64_t kLong = 300;
  const std::vector<float> qkv = RandomQkv(kLong);
  std::mt19937 gen(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(kBatch * kLong * Heads() * kHeadDim);
  for (float& x : w) x = normal(gen);
  std::vector<int32_t> documents(kBatch * kLong);
  for (int64_t i = 0; i < kLong; ++i) {
    documents[i] = i < 70 ? 0 : i < 203 ? 70 : 203;  // sample 0: [0, 70), [70, 203), [203, 300)
    documents[kLong + i] = i < 150 ? 0 : 150;        // sample 1: [0, 150), [150, 300)
  }
  for (const auto& [threads, c] :
       {std::pair{1, Case{documents, 0.0f, -1}}, std::pair{1, Case{documents, 0.0f, 45}},
        std::pair{2, Case{documents, 0.0f, 45}}, std::pair{2, Case{{}, 0.0f, 37}},
        std::pair{2, Case{{}, 0.0f, 150}}}) {
    SetCpuThreads(threads);
    std::vector<float> ctx(w.size()), lse(kBatch * Heads() * kLong), dqkv(qkv.size(), NAN);
    AttentionForward(Shape(kLong), WholeSampleMask(c), qkv.data(), kScale, {}, lse.data(),
                     ctx.data());
    AttentionBackward(Shape(kLong), WholeSampleMask(c), qkv.data(), lse.data(), ctx.data(),
                      w.data(), kScale, {}, dqkv.data());
    const std::vector<double> want = ReferenceGrad(Wide(qkv), Wide(w), c, kLong);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_NEAR(dqkv[k], want[k], 1e-4 * (1.0 + std::fabs(want[k])))
          << "element " << k << " window " << c.window << " threads " << threads;
    }
  }
}

// A window of seq - 1 or more keys is plain causal attention, bit for bit.
TEST(CpuAttentionTest, WindowAsLongAsTheSampleIsCausal) {
  const std::vector<float> qkv = RandomQkv();
  auto run = [&](int64_t window) {
    std::vector<float> ctx(kBatch * kSeq * Heads() * kHeadDim), lse(kBatch * Heads() * kSeq);
    AttentionForward(Shape(kSeq), WholeSampleMask({{}, 0.0f, window}), qkv.data(), kScale, {},
                     lse.data(), ctx.data());
    return ctx;
  };
  EXPECT_EQ(run(kSeq - 1), run(-1));
  EXPECT_NE(run(kSeq - 2), run(-1));
}

}  // namespace
}  // namespace conveyor::cpu
