// The CPU attention (runtime/cpu/attention.h) on shapes that leave partial tiles —
// sequences not a multiple of the query tile or of the micro-kernel's rows, head dims
// 48, 80 and 192 (not a multiple of its 64 columns), grouped query heads, and value
// heads of 128 beside query and key heads of 192 (multi-latent attention) — forward
// (context and log-sum-exp) and backward, against float64 written here from the
// definition: P = softmax(scale Q K^T) over the keys j <= i, O = P V, and
//   dV = P^T dO,  dS = P o (dO V^T - rowsum(dO o O)),  dQ = scale dS K,  dK = scale dS^T Q
// (the group's heads adding into its dK and dV).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/attention.h"

namespace conveyor::cpu {
namespace {

// Megatron's grouped layout written out: group g's query heads, its key head, its value
// head; columns of head h's query, key and value inside a fused row.
struct Layout {
  AttentionShape s;
  int64_t Group(int64_t h) const { return h / s.heads_per_group * s.group_width(); }
  int64_t Query(int64_t h) const { return Group(h) + h % s.heads_per_group * s.head_dim; }
  int64_t Key(int64_t h) const { return Group(h) + s.heads_per_group * s.head_dim; }
  int64_t Value(int64_t h) const { return Key(h) + s.head_dim; }
};

struct Reference {
  std::vector<double> ctx, lse, dqkv;
};

// Row i of head h in sample b: probabilities p[j], j <= i.
std::vector<double> Probabilities(const Layout& l, const std::vector<float>& qkv, double scale,
                                  int64_t b, int64_t h, int64_t i, double* lse) {
  const AttentionShape& s = l.s;
  const int64_t w = s.qkv_width();
  std::vector<double> p(i + 1);
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      dot += static_cast<double>(qkv[(b * s.seq + i) * w + l.Query(h) + d]) *
             qkv[(b * s.seq + j) * w + l.Key(h) + d];
    }
    p[j] = scale * dot;
  }
  const double max = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double x : p) sum += std::exp(x - max);
  *lse = max + std::log(sum);
  for (double& x : p) x = std::exp(x - *lse);
  return p;
}

// One query row's share of every output and gradient.
void AddRow(const Layout& l, const std::vector<float>& qkv, const std::vector<float>& dctx,
            double scale, int64_t b, int64_t h, int64_t i, Reference& r) {
  const AttentionShape& s = l.s;
  const int64_t w = s.qkv_width(), cw = s.context_width(), dv = s.value_dim();
  const auto at = [&](int64_t row, int64_t col) -> double { return qkv[row * w + col]; };
  const int64_t row = b * s.seq + i;
  const std::vector<double> p =
      Probabilities(l, qkv, scale, b, h, i, &r.lse[(b * s.heads() + h) * s.seq + i]);
  double dot_out = 0.0;  // D = dO . O
  for (int64_t c = 0; c < dv; ++c) {
    double o = 0.0;
    for (int64_t j = 0; j <= i; ++j) o += p[j] * at(b * s.seq + j, l.Value(h) + c);
    r.ctx[row * cw + h * dv + c] = o;
    dot_out += o * dctx[row * cw + h * dv + c];
  }
  for (int64_t j = 0; j <= i; ++j) {
    const int64_t key_row = b * s.seq + j;
    double dp = 0.0;
    for (int64_t c = 0; c < dv; ++c) {
      const double d_out = dctx[row * cw + h * dv + c];
      dp += d_out * at(key_row, l.Value(h) + c);
      r.dqkv[key_row * w + l.Value(h) + c] += p[j] * d_out;
    }
    const double ds = p[j] * (dp - dot_out);
    for (int64_t d = 0; d < s.head_dim; ++d) {
      r.dqkv[row * w + l.Query(h) + d] += scale * ds * at(key_row, l.Key(h) + d);
      r.dqkv[key_row * w + l.Key(h) + d] += scale * ds * at(row, l.Query(h) + d);
    }
  }
}

Reference Compute(const Layout& l, const std::vector<float>& qkv, const std::vector<float>& dctx,
                  double scale) {
  const AttentionShape& s = l.s;
  Reference r{std::vector<double>(s.batch * s.seq * s.context_width(), 0.0),
              std::vector<double>(s.batch * s.heads() * s.seq, 0.0),
              std::vector<double>(s.batch * s.seq * s.qkv_width(), 0.0)};
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads(); ++h) {
      for (int64_t i = 0; i < s.seq; ++i) AddRow(l, qkv, dctx, scale, b, h, i, r);
    }
  }
  return r;
}

std::vector<float> Random(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

// Each element within `tolerance` of the reference's largest magnitude (fp32 sums of up
// to seq terms of O(1) size: a few 1e-6 relative).
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  double scale = 0.0;
  for (double x : want) scale = std::max(scale, std::fabs(x));
  const double tolerance = 2e-5 * scale;
  for (size_t e = 0; e < want.size(); ++e) {
    ASSERT_NEAR(got[e], want[e], tolerance) << what << " element " << e;
  }
}

void Check(const AttentionShape& s) {
  SCOPED_TRACE(::testing::Message() << "batch " << s.batch << " seq " << s.seq << " groups "
                                    << s.groups << " x " << s.heads_per_group << " head_dim "
                                    << s.head_dim << " value_dim " << s.value_dim());
  const Layout l{s};
  const std::vector<float> qkv = Random(s.batch * s.seq * s.qkv_width(), 11);
  const std::vector<float> dctx = Random(s.batch * s.seq * s.context_width(), 12);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const Reference want = Compute(l, qkv, dctx, scale);
  std::vector<float> ctx(want.ctx.size()), lse(want.lse.size()), dqkv(want.dqkv.size());
  const AttentionMask causal;
  const AttentionDropout none;
  AttentionForward(s, causal, qkv.data(), scale, none, lse.data(), ctx.data());
  ExpectClose(ctx, want.ctx, "ctx");
  ExpectClose(lse, want.lse, "lse");
  AttentionBackward(s, causal, qkv.data(), lse.data(), ctx.data(), dctx.data(), scale, none,
                    dqkv.data());
  ExpectClose(dqkv, want.dqkv, "dqkv");
}

TEST(AttentionShapesTest, PartialTilesMatchFloat64) {
  Check({/*batch=*/2, /*seq=*/100, /*groups=*/2, /*heads_per_group=*/2, /*head_dim=*/48});
  Check({1, 70, 1, 3, 80});
  Check({1, 45, 2, 1, 192});
  Check({1, 33, 1, 1, 64});
}

TEST(AttentionShapesTest, MultiLatentValueWidthMatchesFloat64) {
  Check({/*batch=*/1, /*seq=*/67, /*groups=*/2, /*heads_per_group=*/2, /*head_dim=*/192,
         /*v_head_dim=*/128});
}

}  // namespace
}  // namespace conveyor::cpu
