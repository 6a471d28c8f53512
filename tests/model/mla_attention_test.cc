// Multi-latent attention (DeepSeek-V2, Liu et al. 2024, §2.1) in a transformer layer
// against a float64 reference written here from the definition: the residual stream after
// the attention block, x + W_o attention(q, k, v), with
//   h = RMSNorm(x);  c_q = W_dq h;  q_h = (W_uq norm(c_q))_h = [q_nope | q_rope]  (or W_q h)
//   [c_kv | k_rope] = W_dkv h;  [k_nope | v]_h = (W_ukv norm(c_kv))_h
//   score = scale (q_nope . k_nope + rope(q_rope) . rope(k_rope)), causal softmax,
//   scale = m(s, mscale_all_dim)^2 / sqrt(qk_head_dim + qk_pos_emb_head_dim)
// where rope rotates halves (Megatron's default), YaRN's frequencies and concentration
// factor written out here too (Peng et al. 2023; m(s, x) = 0.1 x ln s + 1). The
// gradients are the layer and model gradient tests' "mla" variants (test_shapes.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "model/model_groups.h"
#include "model/transformer_layer.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/philox.h"
#include "tests/model/test_shapes.h"
#include "tests/util/in_process_world.h"

namespace conveyor {
namespace {

constexpr int64_t kLayer = 1;
constexpr double kPi = 3.14159265358979323846;

// A parameter's values in float64 by name (one rank: the whole tensor).
std::vector<double> Values(ParameterStore& store, const std::string& name) {
  const Parameter* p = store.Find("layers.1." + name);
  EXPECT_NE(p, nullptr) << name;
  if (p == nullptr) return {};
  return std::vector<double>(p->value.data(), p->value.data() + p->value.numel());
}

// y[r, o] = sum_i w[o, i] x[r, i] over `rows` rows.
std::vector<double> MatMul(const std::vector<double>& x, const std::vector<double>& w, int64_t rows,
                           int64_t in, int64_t out) {
  std::vector<double> y(rows * out, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) y[r * out + o] += w[o * in + i] * x[r * in + i];
    }
  }
  return y;
}

std::vector<double> RmsNorm(const std::vector<double>& x, const std::vector<double>& gamma,
                            double eps) {
  const int64_t width = gamma.size(), rows = x.size() / width;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t i = 0; i < width; ++i) sum += x[r * width + i] * x[r * width + i];
    const double rstd = 1.0 / std::sqrt(sum / width + eps);
    for (int64_t i = 0; i < width; ++i) y[r * width + i] = x[r * width + i] * rstd * gamma[i];
  }
  return y;
}

double Mscale(double s, double x) { return s <= 1.0 ? 1.0 : 0.1 * x * std::log(s) + 1.0; }

// RoPE's frequencies over `dims` rotated dims, YaRN's when the shape asks for them.
std::vector<double> Frequencies(const ModelShape& s, int64_t dims) {
  std::vector<double> f(dims / 2);
  const RopeScaling& y = s.rope_scaling;
  auto correction_dim = [&](double rotations) {
    return dims * std::log(y.original_max_positions / (rotations * 2 * kPi)) /
           (2 * std::log(static_cast<double>(s.rotary_base)));
  };
  const double low = std::max(std::floor(correction_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(y.beta_slow)), dims - 1.0);
  if (high == low) high += 0.001;
  for (int64_t i = 0; i < dims / 2; ++i) {
    f[i] = std::pow(static_cast<double>(s.rotary_base), -2.0 * i / dims);
    if (y.kind != RopeScalingKind::kYarn) continue;
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    f[i] = f[i] / y.factor * ramp + f[i] * (1.0 - ramp);
  }
  return f;
}

// Rotates v[0, dims) (halves paired) at `position`, times the concentration factor.
void Rotate(const ModelShape& s, int64_t position, double* v, int64_t dims) {
  const std::vector<double> f = Frequencies(s, dims);
  const RopeScaling& y = s.rope_scaling;
  const double c = y.kind == RopeScalingKind::kYarn
                       ? Mscale(y.factor, y.mscale) / Mscale(y.factor, y.mscale_all_dim)
                       : 1.0;
  const int64_t half = dims / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = v[i], b = v[i + half], angle = position * f[i];
    v[i] = c * (a * std::cos(angle) - b * std::sin(angle));
    v[i + half] = c * (b * std::cos(angle) + a * std::sin(angle));
  }
}

// The residual stream after MLA's attention block, [batch * seq, hidden].
std::vector<double> Reference(const ModelShape& s, ParameterStore& store,
                              const std::vector<double>& x, int64_t batch) {
  const MlaShape& m = s.mla;
  const int64_t rows = batch * s.seq, dn = m.qk_head_dim, dr = m.qk_pos_emb_head_dim;
  const int64_t dv = m.v_head_dim, dqk = dn + dr, latent = m.kv_lora_rank;
  auto latent_norm = [&](const std::vector<double>& c, const std::string& name) {
    return s.qk_layernorm ? RmsNorm(c, Values(store, name), s.norm_epsilon) : c;
  };
  const std::vector<double> h = RmsNorm(x, Values(store, "input_norm.weight"), s.norm_epsilon);
  std::vector<double> q;  // [rows, heads * dqk], per head [q_nope | q_rope]
  if (m.q_lora_rank > 0) {
    const std::vector<double> c_q =
        MatMul(h, Values(store, "attention.q_down.weight"), rows, s.hidden, m.q_lora_rank);
    q = MatMul(latent_norm(c_q, "attention.q_latent_norm.weight"),
               Values(store, "attention.q_up.weight"), rows, m.q_lora_rank, s.heads * dqk);
  } else {
    q = MatMul(h, Values(store, "attention.q.weight"), rows, s.hidden, s.heads * dqk);
  }
  const std::vector<double> down =
      MatMul(h, Values(store, "attention.kv_down.weight"), rows, s.hidden, latent + dr);
  std::vector<double> c_kv(rows * latent), k_rope(rows * dr);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < latent; ++i) c_kv[r * latent + i] = down[r * (latent + dr) + i];
    for (int64_t i = 0; i < dr; ++i) k_rope[r * dr + i] = down[r * (latent + dr) + latent + i];
    Rotate(s, r % s.seq, &k_rope[r * dr], dr);
    for (int64_t head = 0; head < s.heads; ++head) {
      Rotate(s, r % s.seq, &q[r * s.heads * dqk + head * dqk + dn], dr);
    }
  }
  const std::vector<double> kv =
      MatMul(latent_norm(c_kv, "attention.kv_latent_norm.weight"),
             Values(store, "attention.kv_up.weight"), rows, latent, s.heads * (dn + dv));
  const bool yarn = s.rope_scaling.kind == RopeScalingKind::kYarn;
  const double m_all = yarn ? Mscale(s.rope_scaling.factor, s.rope_scaling.mscale_all_dim) : 1.0;
  const double scale = m_all * m_all / std::sqrt(static_cast<double>(dqk));
  std::vector<double> ctx(rows * s.heads * dv, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t head = 0; head < s.heads; ++head) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t ri = b * s.seq + i;
        const double* qi = &q[ri * s.heads * dqk + head * dqk];
        std::vector<double> score(i + 1);
        double max = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t rj = b * s.seq + j;
          const double* kj = &kv[rj * s.heads * (dn + dv) + head * (dn + dv)];
          double dot = 0.0;
          for (int64_t d = 0; d < dn; ++d) dot += qi[d] * kj[d];
          for (int64_t d = 0; d < dr; ++d) dot += qi[dn + d] * k_rope[rj * dr + d];
          score[j] = scale * dot;
          max = std::max(max, score[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(score[j] - max);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(score[j] - max) / sum;
          const double* vj = &kv[(b * s.seq + j) * s.heads * (dn + dv) + head * (dn + dv) + dn];
          for (int64_t d = 0; d < dv; ++d) ctx[ri * s.heads * dv + head * dv + d] += p * vj[d];
        }
      }
    }
  }
  std::vector<double> out =
      MatMul(ctx, Values(store, "attention.proj.weight"), rows, s.heads * dv, s.hidden);
  for (int64_t i = 0; i < rows * s.hidden; ++i) out[i] += x[i];
  return out;
}

struct Case {
  std::string name;
  ModelShape shape;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  ModelShape yarn = testing_util::MlaShapeOf(/*q_lora_rank=*/6, /*latent_norms=*/true);
  yarn.rope_scaling.kind = RopeScalingKind::kYarn;
  yarn.rope_scaling.factor = 4.0;
  yarn.rope_scaling.original_max_positions = 8;  // the ramp interpolates one of two pairs
  yarn.rope_scaling.mscale = 1.0;
  yarn.rope_scaling.mscale_all_dim = 0.7;  // a concentration factor and a scale other than 1
  return {{"query_latent_norms", testing_util::MlaShapeOf(6, true)},
          {"no_query_latent", testing_util::MlaShapeOf(0, false)},
          {"yarn", yarn}};
}

class MlaAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(MlaAttentionTest, AttentionBlockMatchesFloat64Reference) {
  const ModelShape shape = GetParam().shape;
  ParameterStore store(/*seed=*/5);
  const RopeTable rope(shape.seq, shape.rotary_dims(), shape.rotary_base, shape.rope_scaling);
  const TensorParallel one_rank;
  TransformerLayer layer(&CpuOps::Get(), &store, shape, kLayer, &rope, /*seed=*/5, &one_rank);
  // Norm weights away from their initial ones, so a missing or misplaced norm shows.
  const CounterRng rng(3, 4);
  for (Parameter* p : store.parameters()) {
    if (p->name.find("norm") == std::string::npos) continue;
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data()[i] += 0.3f * rng.Normal(i);
  }
  const MicroBatchContext mb{/*iteration=*/0, /*first_sample=*/0, /*batch=*/2, shape.seq};
  Tensor x = Tensor::Zeros({mb.tokens(), shape.hidden}, MemoryCategory::kActivations);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = CounterRng(7, 8).Normal(i);
  LayerStash stash;
  ASSERT_TRUE(layer.Forward(x, mb, &stash).ok());

  const std::vector<double> want =
      Reference(shape, store, std::vector<double>(x.data(), x.data() + x.numel()), mb.batch);
  ASSERT_EQ(stash.x1.numel(), static_cast<int64_t>(want.size()));
  double max_attention = 0.0;
  for (int64_t i = 0; i < stash.x1.numel(); ++i) {
    // fp32 against float64 over sums of ~20 terms of size ~1.
    EXPECT_NEAR(stash.x1.data()[i], want[i], 2e-5 * (1.0 + std::fabs(want[i]))) << "element " << i;
    max_attention = std::max(max_attention, std::fabs(want[i] - x.data()[i]));
  }
  EXPECT_GT(max_attention, 0.1);  // the block adds something to compare
}

TEST(MlaAttentionTest, SoftmaxScaleIsDeepSeeks) {
  ModelShape s = testing_util::MlaShapeOf(6, true);  // q head: 3 + 4
  EXPECT_FLOAT_EQ(MlaSoftmaxScale(s), 1.0f / std::sqrt(7.0f));
  s.rope_scaling.kind = RopeScalingKind::kYarn;
  s.rope_scaling.factor = 40.0;  // DeepSeek-V3's
  s.rope_scaling.mscale_all_dim = 1.0;
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_FLOAT_EQ(MlaSoftmaxScale(s), static_cast<float>(m * m / std::sqrt(7.0)));
}

TEST(MlaAttentionTest, ParametersAreDeepSeeksProjections) {
  ParameterStore store(1);
  const TensorParallel one_rank;
  TransformerLayer layer(&CpuOps::Get(), &store, testing_util::MlaShapeOf(6, true), kLayer, nullptr,
                         1, &one_rank);
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const Parameter* p : layer.Parameters()) {
    if (p->name.find(".attention.") == std::string::npos) continue;
    names.push_back(p->name.substr(p->name.find("attention.")));
    shapes.push_back(p->global_shape);
  }
  // hidden 16, 4 heads, q latent 6, kv latent 5, q/k heads 3 + 4, v heads 5.
  EXPECT_EQ(names,
            (std::vector<std::string>{"attention.q_down.weight", "attention.q_latent_norm.weight",
                                      "attention.q_up.weight", "attention.kv_down.weight",
                                      "attention.kv_latent_norm.weight", "attention.kv_up.weight",
                                      "attention.proj.weight"}));
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{
                        {6, 16}, {6}, {28, 6}, {9, 16}, {5}, {32, 5}, {16, 20}}));
}

// One layer's output, input gradient and weight gradients (by name, global order) on
// one rank or on a tensor-parallel rank (its rows and its part of each parameter).
struct LayerRun {
  std::vector<float> out, dx;
  std::map<std::string, std::vector<float>> grads;
  std::map<std::string, std::vector<bool>> held;  // the elements the rank holds
};

Tensor RandomRows(int64_t rows, int64_t width, uint64_t stream, int64_t first_row) {
  Tensor t = Tensor::Zeros({rows, width}, MemoryCategory::kActivations);
  const CounterRng rng(21, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = rng.Normal(first_row * width + i);
  return t;
}

absl::StatusOr<LayerRun> RunLayer(const ModelShape& shape, const TensorParallel& tp) {
  ParameterStore store(/*seed=*/5);
  const RopeTable rope(shape.seq, shape.rotary_dims(), shape.rotary_base);
  TransformerLayer layer(&CpuOps::Get(), &store, shape, kLayer, &rope, /*seed=*/5, &tp);
  const MicroBatchContext mb{/*iteration=*/1, /*first_sample=*/0, /*batch=*/2, shape.seq};
  const int64_t rows = tp.sequence_parallel() ? mb.tokens() / tp.size() : mb.tokens();
  const int64_t first = tp.FirstShardRow(rows);
  LayerStash stash;
  ASSIGN_OR_RETURN(const Tensor out,
                   layer.Forward(RandomRows(rows, shape.hidden, 1, first), mb, &stash));
  ASSIGN_OR_RETURN(const Tensor dx,
                   layer.BackwardInput(RandomRows(rows, shape.hidden, 2, first), mb, &stash));
  layer.BackwardWeight(&stash);
  LayerRun run{{out.data(), out.data() + out.numel()}, {dx.data(), dx.data() + dx.numel()}, {}, {}};
  for (Parameter* p : layer.Parameters()) {
    // What the trainer's gradient reduction sums over the tensor-parallel group.
    if (p->partial_over_heads || (p->sequence_parallel && tp.sequence_parallel())) {
      RETURN_IF_ERROR(tp.AllReduce(p->grad));
    }
    int64_t numel = 1;
    for (int64_t d : p->global_shape) numel *= d;
    std::vector<float>& g = run.grads[p->name];
    std::vector<bool>& held = run.held[p->name];
    g.assign(numel, 0.0f);
    held.assign(numel, false);
    const std::vector<int64_t> index = GlobalIndices(*p);
    for (size_t i = 0; i < index.size(); ++i) {
      g[index[i]] = p->grad.data()[i];
      held[index[i]] = true;
    }
  }
  return run;
}

class MlaTensorParallelTest : public ::testing::TestWithParam<bool> {};

// Each rank's rows of the output and input gradient (its sequence shard, or all of them)
// and its part of every weight gradient, summed over the group where the trainer sums
// them, equal the one-rank layer's.
TEST_P(MlaTensorParallelTest, TwoRanksEqualOne) {
  const bool sequence_parallel = GetParam();
  const ModelShape shape = testing_util::MlaShapeOf(/*q_lora_rank=*/6, /*latent_norms=*/true);
  const TensorParallel one_rank;
  const absl::StatusOr<LayerRun> want = RunLayer(shape, one_rank);
  ASSERT_TRUE(want.ok()) << want.status();
  testing_util::InProcessWorld world(2);
  std::vector<LayerRun> runs(2);
  const std::vector<absl::Status> statuses =
      world.Run([&](int rank, Communicator& comm) -> absl::Status {
        SingleRankGroups others;
        ModelGroups groups = others.groups();
        groups.tp = groups.etp = &comm;  // expert TP as large as TP is the TP group
        const TensorParallel tp(groups, sequence_parallel);
        ASSIGN_OR_RETURN(runs[rank], RunLayer(shape, tp));
        return absl::OkStatus();
      });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  for (int rank = 0; rank < 2; ++rank) {
    const size_t rows = runs[rank].out.size();
    const size_t first = sequence_parallel ? rank * rows : 0;
    for (size_t i = 0; i < rows; ++i) {
      EXPECT_NEAR(runs[rank].out[i], want->out[first + i], 1e-5) << "out " << rank << " " << i;
      EXPECT_NEAR(runs[rank].dx[i], want->dx[first + i], 1e-5) << "dx " << rank << " " << i;
    }
    for (const auto& [name, grad] : want->grads) {
      const std::vector<float>& got = runs[rank].grads.at(name);
      ASSERT_EQ(got.size(), grad.size()) << name;
      for (size_t i = 0; i < grad.size(); ++i) {
        if (!runs[rank].held.at(name)[i]) continue;
        EXPECT_NEAR(got[i], grad[i], 1e-4 * (1.0 + std::fabs(grad[i]))) << name << " " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, MlaTensorParallelTest, ::testing::Bool());

INSTANTIATE_TEST_SUITE_P(Variants, MlaAttentionTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor
