// The CPU attention with value heads narrower than the query and key heads (multi-latent
// attention's v_head_dim, runtime/op_params.h) against a float64 reference written here:
// the whole sample, two key blocks merged in both orders (ring attention's steps, under
// context parallelism's chunk layout), the input gradient against central differences of
// the reference, and the blocks' gradients summed against the whole sample's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/attention.h"

namespace conveyor::cpu {
namespace {

// Two query groups of two heads, queries and keys 6 wide, values 3.
constexpr int64_t kBatch = 2, kSeq = 8, kGroups = 2, kPerGroup = 2, kQk = 6, kV = 3;
constexpr int64_t kHeads = kGroups * kPerGroup;
constexpr int64_t kWidth = kGroups * ((kPerGroup + 1) * kQk + kV);
constexpr int64_t kContext = kHeads * kV;
constexpr float kScale = 0.4f;

AttentionShape Shape(int64_t seq) { return {kBatch, seq, kGroups, kPerGroup, kQk, kV}; }

// The grouped layout written out: group g's query heads, its key head, its value head.
int64_t GroupStart(int64_t h) { return (h / kPerGroup) * ((kPerGroup + 1) * kQk + kV); }
int64_t QueryColumn(int64_t h) { return GroupStart(h) + (h % kPerGroup) * kQk; }
int64_t KeyColumn(int64_t h) { return GroupStart(h) + kPerGroup * kQk; }
int64_t ValueColumn(int64_t h) { return KeyColumn(h) + kQk; }

// ctx[b, i, h, :] = sum_{j <= i} softmax_j(scale q_i . k_j) v_j.
std::vector<double> Reference(const std::vector<double>& qkv) {
  std::vector<double> ctx(kBatch * kSeq * kContext, 0.0);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t i = 0; i < kSeq; ++i) {
        std::vector<double> s(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < kQk; ++d) {
            dot += qkv[(b * kSeq + i) * kWidth + QueryColumn(h) + d] *
                   qkv[(b * kSeq + j) * kWidth + KeyColumn(h) + d];
          }
          s[j] = kScale * dot;
        }
        const double max = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (double x : s) sum += std::exp(x - max);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(s[j] - max) / sum;
          for (int64_t d = 0; d < kV; ++d) {
            ctx[(b * kSeq + i) * kContext + h * kV + d] +=
                p * qkv[(b * kSeq + j) * kWidth + ValueColumn(h) + d];
          }
        }
      }
    }
  }
  return ctx;
}

std::vector<float> Random(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

// Context parallelism's layout on 2 ranks: chunks {0, 3} and {1, 2} of 2 tokens.
std::vector<int32_t> RankPositions(int rank) {
  return rank == 0 ? std::vector<int32_t>{0, 1, 6, 7} : std::vector<int32_t>{2, 3, 4, 5};
}

template <typename T>
std::vector<T> RowsOf(const std::vector<T>& full, int rank, int64_t width) {
  std::vector<T> rows;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int32_t p : RankPositions(rank)) {
      rows.insert(rows.end(), full.begin() + (b * kSeq + p) * width,
                  full.begin() + (b * kSeq + p + 1) * width);
    }
  }
  return rows;
}

TEST(AttentionValueWidthTest, ShapeWidths) {
  const AttentionShape s = Shape(kSeq);
  EXPECT_EQ(s.qkv_width(), kWidth);
  EXPECT_EQ(s.context_width(), kContext);
  EXPECT_EQ(s.kv_width(), kGroups * (kQk + kV));
}

TEST(AttentionValueWidthTest, WholeSampleMatchesReference) {
  const std::vector<float> qkv = Random(kBatch * kSeq * kWidth, 7);
  std::vector<float> ctx(kBatch * kSeq * kContext), lse(kBatch * kHeads * kSeq);
  AttentionForward(Shape(kSeq), {}, qkv.data(), kScale, {}, lse.data(), ctx.data());
  const std::vector<double> want = Reference({qkv.begin(), qkv.end()});
  for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR(ctx[k], want[k], 1e-5) << k;
}

TEST(AttentionValueWidthTest, KeyBlocksInEitherOrderMatchReference) {
  const std::vector<float> qkv = Random(kBatch * kSeq * kWidth, 8);
  const std::vector<double> want = Reference({qkv.begin(), qkv.end()});
  const int64_t local = kSeq / 2;
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<float> mine = RowsOf(qkv, rank, kWidth);
    const std::vector<int32_t> queries = RankPositions(rank);
    for (const std::vector<int>& order : {std::vector<int>{0, 1}, std::vector<int>{1, 0}}) {
      std::vector<float> ctx(kBatch * local * kContext), lse(kBatch * kHeads * local);
      for (size_t step = 0; step < order.size(); ++step) {
        const std::vector<float> source = RowsOf(qkv, order[step], kWidth);
        std::vector<float> kv(kBatch * local * Shape(local).kv_width());
        PackKeysValues(Shape(local), source.data(), kv.data());
        const std::vector<int32_t> keys = RankPositions(order[step]);
        const AttentionMask mask{queries, keys, {}, -1};
        AttentionBlockForward(Shape(local), local, mask, mine.data(), kv.data(), kScale, {},
                              step == 0, ctx.data(), lse.data());
      }
      const std::vector<double> want_rows = RowsOf(want, rank, kContext);
      for (size_t k = 0; k < want_rows.size(); ++k) {
        ASSERT_NEAR(ctx[k], want_rows[k], 1e-5) << "rank " << rank << " element " << k;
      }
    }
  }
}

TEST(AttentionValueWidthTest, GradientsMatchFiniteDifferencesAndBlocksSumToThem) {
  const std::vector<float> qkv = Random(kBatch * kSeq * kWidth, 9);
  const std::vector<float> w = Random(kBatch * kSeq * kContext, 10);  // d(loss)/d(ctx)
  std::vector<float> ctx(w.size()), lse(kBatch * kHeads * kSeq), dqkv(qkv.size());
  AttentionForward(Shape(kSeq), {}, qkv.data(), kScale, {}, lse.data(), ctx.data());
  AttentionBackward(Shape(kSeq), {}, qkv.data(), lse.data(), ctx.data(), w.data(), kScale, {},
                    dqkv.data());
  std::vector<double> x(qkv.begin(), qkv.end());
  auto loss = [&] {
    const std::vector<double> c = Reference(x);
    double l = 0.0;
    for (size_t k = 0; k < c.size(); ++k) l += c[k] * w[k];
    return l;
  };
  for (size_t k = 0; k < x.size(); ++k) {
    const double keep = x[k], eps = 1e-4;
    x[k] = keep + eps;
    const double up = loss();
    x[k] = keep - eps;
    const double down = loss();
    x[k] = keep;
    const double want = (up - down) / (2 * eps);
    ASSERT_NEAR(dqkv[k], want, 2e-4 * (1.0 + std::fabs(want))) << "element " << k;
  }
  // Ring attention's backward: each rank's queries against both blocks, each block's
  // key/value gradient added to its owner's rows.
  const int64_t local = kSeq / 2, kv_width = Shape(local).kv_width();
  std::vector<std::vector<float>> d_rows(2), d_kv(2);
  for (int rank = 0; rank < 2; ++rank) {
    d_rows[rank].assign(kBatch * local * kWidth, 0.0f);
    d_kv[rank].assign(kBatch * local * kv_width, 0.0f);
  }
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<float> mine = RowsOf(qkv, rank, kWidth);
    const std::vector<float> my_ctx = RowsOf(ctx, rank, kContext);
    const std::vector<float> my_w = RowsOf(w, rank, kContext);
    std::vector<float> my_lse(kBatch * kHeads * local);
    for (int64_t bh = 0; bh < kBatch * kHeads; ++bh) {
      for (int64_t i = 0; i < local; ++i) {
        my_lse[bh * local + i] = lse[bh * kSeq + RankPositions(rank)[i]];
      }
    }
    for (int source = 0; source < 2; ++source) {
      const std::vector<float> source_rows = RowsOf(qkv, source, kWidth);
      std::vector<float> kv(kBatch * local * kv_width);
      PackKeysValues(Shape(local), source_rows.data(), kv.data());
      const std::vector<int32_t> queries = RankPositions(rank), keys = RankPositions(source);
      const AttentionMask mask{queries, keys, {}, -1};
      AttentionBlockBackward(Shape(local), local, mask, mine.data(), kv.data(), my_ctx.data(),
                             my_lse.data(), my_w.data(), kScale, {}, d_rows[rank].data(),
                             d_kv[source].data());
    }
  }
  for (int rank = 0; rank < 2; ++rank) {
    AddKeyValueGrad(Shape(local), d_kv[rank].data(), d_rows[rank].data());
    const std::vector<float> want = RowsOf(dqkv, rank, kWidth);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_NEAR(d_rows[rank][k], want[k], 1e-5) << "rank " << rank << " element " << k;
    }
  }
}

}  // namespace
}  // namespace conveyor::cpu
