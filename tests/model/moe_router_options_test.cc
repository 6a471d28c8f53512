// The model's router (model/moe_router.h) under Megatron's --moe-router-dtype fp32 and
// --moe-router-load-balancing-type global_aux_loss, against references written here:
// the gate GEMM of the bf16 input and weight in float64 (Megatron's router_gating_linear
// widens both and returns fp32 logits), its routing and gradients; and the global
// auxiliary loss from Megatron's _apply_global_aux_loss (counts summed over the
// data-parallel ranks' micro-batches, averaged over the step's micro-batches so far,
// T = the tokens of all of them), its gradient also against central differences.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_groups.h"
#include "model/moe_router.h"
#include "model/parameter_placement.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/philox.h"
#include "tests/util/in_process_world.h"

namespace conveyor {
namespace {

constexpr int64_t kHidden = 16, kExperts = 5, kTopK = 2, kBatch = 2, kSeq = 3;
constexpr int64_t kTokens = kBatch * kSeq;

// bf16 round to nearest even, written out (no Conveyor code).
float Bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);
  bits &= 0xFFFF0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

std::vector<float> Random(int64_t n, uint64_t stream, float std) {
  const CounterRng rng(17, stream);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std * rng.Normal(i);
  return v;
}

Tensor HostTensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  Tensor t = Tensor::Zeros(std::move(shape), MemoryCategory::kActivations);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

std::vector<float> Floats(const Ops& ops, const Tensor& t) { return ToHostFloats(ops, t); }

MoeShape Shape(bool router_fp32) {
  MoeShape m;
  m.router.experts = kExperts;
  m.router.topk = kTopK;
  m.ffn_hidden = 8;
  m.layers = {true};
  m.router_fp32 = router_fp32;
  return m;
}

MicroBatchContext Micro(int64_t iteration, int64_t first_sample) {
  return MicroBatchContext{iteration, first_sample, kBatch, kSeq};
}

// One router's forward and backward on x with the routing weights' gradient d_probs.
struct RouterRun {
  RouterStash stash;
  std::vector<float> logits, dx, dw;
};

RouterRun RunRouter(const Ops& ops, const MoeShape& shape, const std::vector<float>& x,
                    const std::vector<float>& d_probs) {
  ParameterStore store(/*seed=*/3);
  const TensorParallel one_rank;
  MoeRouter router(&ops, &store, "layers.0.mlp.router", kHidden, shape, 0.5f, one_rank);
  std::vector<Parameter*> params;
  router.AppendParameters(&params);
  PlaceParameters(ops, params);
  const Tensor input = ops.CastTo(HostTensor(x, {kTokens, kHidden}), ops.compute_dtype());
  RouterRun run;
  EXPECT_TRUE(router.Forward(input, Micro(1, 0), &run.stash).ok());
  run.logits = run.stash.logits;
  Tensor dx = ops.CastTo(Tensor::Zeros({kTokens, kHidden}, MemoryCategory::kActivations),
                         ops.compute_dtype());
  router.BackwardInput(d_probs, 1.0f, &run.stash, &dx);
  run.dx = Floats(ops, dx);
  router.BackwardWeight(input, &run.stash);
  run.dw = Floats(ops, params[0]->grad);
  run.stash = RouterStash();
  return run;
}

// The master weight the router drew (ParameterStore's seed 3, the same name).
std::vector<float> RouterWeight() {
  ParameterStore store(/*seed=*/3);
  const TensorParallel one_rank;
  MoeRouter router(&CpuOps::Get(), &store, "layers.0.mlp.router", kHidden, Shape(false), 0.5f,
                   one_rank);
  std::vector<Parameter*> params;
  router.AppendParameters(&params);
  PlaceParameters(CpuOps::Get(), params);
  const Tensor& w = params[0]->value;
  return std::vector<float>(w.data(), w.data() + w.numel());
}

TEST(RouterDtypeTest, Fp32UnderBf16RoutesOnTheFloat64ReferenceOfTheBf16Operands) {
  const Bf16EmulationOps bf16(&CpuOps::Get());
  std::vector<float> x = Random(kTokens * kHidden, 1, 1.0f), w = RouterWeight();
  for (float& v : x) v = Bf16(v);  // what a bf16 activation holds
  for (float& v : w) v = Bf16(v);  // the bf16 copy of the master weight
  const std::vector<float> d_probs = Random(kTokens * kTopK, 2, 1.0f);
  const RouterRun fp32 = RunRouter(bf16, Shape(true), x, d_probs);
  const RouterRun plain = RunRouter(bf16, Shape(false), x, d_probs);

  // Reference: logits in float64; softmax over the top-k logits (Megatron's default
  // score function) and its gradient; dx rounded to bf16 once, dW in full precision.
  std::vector<double> dl(kTokens * kExperts, 0.0);
  int plain_logits_off = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    std::vector<double> l(kExperts, 0.0);
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int64_t h = 0; h < kHidden; ++h) l[e] += double{x[t * kHidden + h]} * w[e * kHidden + h];
      EXPECT_NEAR(fp32.logits[t * kExperts + e], l[e], 1e-5 * (1.0 + std::fabs(l[e])));
      plain_logits_off += std::fabs(plain.logits[t * kExperts + e] - l[e]) > 1e-4;
    }
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    double z = 0.0, dot = 0.0;
    for (int j = 0; j < kTopK; ++j) z += std::exp(l[order[j]]);
    for (int j = 0; j < kTopK; ++j) {
      const double p = std::exp(l[order[j]]) / z;
      dot += p * d_probs[t * kTopK + j];
    }
    for (int j = 0; j < kTopK; ++j) {
      const double p = std::exp(l[order[j]]) / z;
      dl[t * kExperts + order[j]] = p * (d_probs[t * kTopK + j] - dot);
    }
  }
  EXPECT_GT(plain_logits_off, 0) << "bf16 logits should differ from the fp32 reference";
  int plain_dw_off = 0;
  for (int64_t e = 0; e < kExperts; ++e) {
    for (int64_t h = 0; h < kHidden; ++h) {
      double dw = 0.0;
      for (int64_t t = 0; t < kTokens; ++t) dw += dl[t * kExperts + e] * x[t * kHidden + h];
      EXPECT_NEAR(fp32.dw[e * kHidden + h], dw, 1e-5 * (1.0 + std::fabs(dw)));
      plain_dw_off += std::fabs(plain.dw[e * kHidden + h] - dw) > 1e-4 * (1.0 + std::fabs(dw));
    }
  }
  EXPECT_GT(plain_dw_off, 0) << "bf16 logit gradients should move dW off the fp32 reference";
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t h = 0; h < kHidden; ++h) {
      double dx = 0.0;
      for (int64_t e = 0; e < kExperts; ++e) dx += dl[t * kExperts + e] * w[e * kHidden + h];
      // One bf16 rounding of the fp32 product: within one bf16 unit of the reference.
      EXPECT_NEAR(fp32.dx[t * kHidden + h], dx, std::fabs(dx) / 128.0 + 1e-7);
    }
  }
}

TEST(RouterDtypeTest, RoutingDecisionsFollowTheFp32Logits) {
  const Bf16EmulationOps bf16(&CpuOps::Get());
  std::vector<float> x = Random(kTokens * kHidden, 4, 1.0f), w = RouterWeight();
  for (float& v : x) v = Bf16(v);
  for (float& v : w) v = Bf16(v);
  ParameterStore store(/*seed=*/3);
  const TensorParallel one_rank;
  MoeRouter router(&bf16, &store, "layers.0.mlp.router", kHidden, Shape(true), 0.5f, one_rank);
  std::vector<Parameter*> params;
  router.AppendParameters(&params);
  PlaceParameters(bf16, params);
  RouterStash stash;
  const Tensor input = bf16.CastTo(HostTensor(x, {kTokens, kHidden}), DType::kBFloat16);
  ASSERT_TRUE(router.Forward(input, Micro(1, 0), &stash).ok());
  for (int64_t t = 0; t < kTokens; ++t) {
    std::vector<double> l(kExperts, 0.0);
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int64_t h = 0; h < kHidden; ++h) l[e] += double{x[t * kHidden + h]} * w[e * kHidden + h];
    }
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    const double z = std::exp(l[order[0]]) + std::exp(l[order[1]]);
    for (int j = 0; j < kTopK; ++j) {
      EXPECT_EQ(stash.routing.experts[t * kTopK + j], order[j]) << "token " << t;
      EXPECT_NEAR(stash.routing.probs[t * kTopK + j], std::exp(l[order[j]]) / z, 1e-6);
    }
  }
}

TEST(RouterDtypeTest, WithoutBf16TheFlagChangesNothing) {
  const std::vector<float> x = Random(kTokens * kHidden, 5, 1.0f);
  const std::vector<float> d_probs = Random(kTokens * kTopK, 6, 1.0f);
  MoeShape with_losses = Shape(false);
  with_losses.aux_loss_coeff = 0.1f;
  with_losses.z_loss_coeff = 0.01f;
  MoeShape fp32_flag = with_losses;
  fp32_flag.router_fp32 = true;
  const RouterRun plain = RunRouter(CpuOps::Get(), with_losses, x, d_probs);
  const RouterRun flagged = RunRouter(CpuOps::Get(), fp32_flag, x, d_probs);
  EXPECT_EQ(plain.logits, flagged.logits);
  EXPECT_EQ(plain.dx, flagged.dx);
  EXPECT_EQ(plain.dw, flagged.dw);
}

// Megatron's global_aux_loss, from its formula: the counts of each place's micro-batches
// (`counts[m]`, summed over the ranks), their mean over places 0..m, T_g the tokens of
// the ranks' micro-batches of one place. Scores for the auxiliary loss: the softmax.
struct Scores {
  std::vector<double> s;  // [tokens, experts]
  std::vector<double> counts;
};
Scores SoftmaxScores(const std::vector<float>& logits) {
  Scores out{std::vector<double>(logits.size()), std::vector<double>(kExperts, 0.0)};
  for (int64_t t = 0; t < kTokens; ++t) {
    double z = 0.0;
    for (int64_t e = 0; e < kExperts; ++e) z += std::exp(double{logits[t * kExperts + e]});
    for (int64_t e = 0; e < kExperts; ++e) {
      out.s[t * kExperts + e] = std::exp(double{logits[t * kExperts + e]}) / z;
    }
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return out.s[t * kExperts + a] > out.s[t * kExperts + b];
    });
    for (int j = 0; j < kTopK; ++j) out.counts[order[j]] += 1.0;
  }
  return out;
}

// L_r = E / (k T_g^2) sum_e mean_c[e] * sum_t s[t, e] of one rank's micro-batch.
double RankLoss(const std::vector<double>& mean_counts, const std::vector<double>& s, int ranks) {
  const double tg = double(kTokens) * ranks;
  double loss = 0.0;
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t e = 0; e < kExperts; ++e) loss += mean_counts[e] * s[t * kExperts + e];
  }
  return loss * kExperts / (kTopK * tg * tg);
}

MoeShape GlobalShape() {
  MoeShape m = Shape(false);
  m.global_aux_loss_coeff = 0.25f;
  return m;
}

// The micro-batch of `rank` at place `m` of the step (its router input).
std::vector<float> MicroBatchInput(int rank, int m) {
  return Random(kTokens * kHidden, 10 + 4 * rank + m, 1.0f);
}

// Forwards the `places` micro-batches of `rank` (its samples follow the lower ranks'
// in the step) through its router; the stash of each.
std::vector<RouterStash> ForwardPlaces(MoeRouter& router, int rank, int places, int64_t iteration) {
  std::vector<RouterStash> out(places);
  for (int m = 0; m < places; ++m) {
    const Tensor x = HostTensor(MicroBatchInput(rank, m), {kTokens, kHidden});
    const MicroBatchContext mb = Micro(iteration, (rank * places + m) * kBatch);
    EXPECT_TRUE(router.Forward(x, mb, &out[m]).ok());
  }
  return out;
}

TEST(GlobalAuxLossTest, OneRankAveragesTheStepsCountsSoFarAndResetsEachStep) {
  ParameterStore store(/*seed=*/3);
  const TensorParallel one_rank;
  const MoeShape shape = GlobalShape();
  MoeRouter router(&CpuOps::Get(), &store, "layers.0.mlp.router", kHidden, shape, 0.5f, one_rank);
  std::vector<Parameter*> params;
  router.AppendParameters(&params);
  PlaceParameters(CpuOps::Get(), params);
  const std::vector<RouterStash> step = ForwardPlaces(router, 0, 3, /*iteration=*/1);
  std::vector<double> summed(kExperts, 0.0);
  for (int m = 0; m < 3; ++m) {
    SCOPED_TRACE(m);
    const Scores sc = SoftmaxScores(step[m].logits);
    std::vector<double> mean(kExperts);
    for (int64_t e = 0; e < kExperts; ++e) {
      summed[e] += sc.counts[e];
      mean[e] = summed[e] / (m + 1);
    }
    const double loss = RankLoss(mean, sc.s, 1);
    EXPECT_NEAR(step[m].losses.global_load_balancing, loss, 1e-9);
    EXPECT_EQ(step[m].losses.load_balancing, 0.0);
    // Its gradient: coeff * dL/dlogits with the counts held, by central differences of
    // the reference.
    for (int64_t i = 0; i < kTokens * kExperts; ++i) {
      std::vector<float> l = step[m].logits;
      const float h = 1e-3f;
      l[i] += h;
      const double up = RankLoss(mean, SoftmaxScores(l).s, 1);
      l[i] -= 2 * h;
      const double down = RankLoss(mean, SoftmaxScores(l).s, 1);
      EXPECT_NEAR(step[m].aux_grad[i], shape.global_aux_loss_coeff * (up - down) / (2 * h), 2e-5)
          << "logit " << i;
    }
  }
  // A recomputed forward of place 1 finds the same counts; a new step starts anew.
  RouterStash again;
  ASSERT_TRUE(
      router
          .Forward(HostTensor(MicroBatchInput(0, 1), {kTokens, kHidden}), Micro(1, kBatch), &again)
          .ok());
  EXPECT_EQ(again.losses.global_load_balancing, step[1].losses.global_load_balancing);
  RouterStash next;
  ASSERT_TRUE(
      router.Forward(HostTensor(MicroBatchInput(0, 1), {kTokens, kHidden}), Micro(2, 0), &next)
          .ok());
  const Scores alone = SoftmaxScores(next.logits);
  EXPECT_NEAR(next.losses.global_load_balancing, RankLoss(alone.counts, alone.s, 1), 1e-9);
}

TEST(GlobalAuxLossTest, DataParallelRanksCountTheirMicroBatchesTogether) {
  constexpr int kRanks = 2, kPlaces = 2;
  const MoeShape shape = GlobalShape();
  std::vector<std::vector<RouterStash>> stashes(kRanks);
  testing_util::InProcessWorld world(kRanks);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& dp) {
    ParameterStore store(/*seed=*/3);
    SingleRankGroups others;
    ModelGroups data_parallel = others.groups();
    data_parallel.dp = &dp;
    const TensorParallel groups(data_parallel, false);
    MoeRouter router(&CpuOps::Get(), &store, "layers.0.mlp.router", kHidden, shape, 0.5f, groups);
    std::vector<Parameter*> params;
    router.AppendParameters(&params);
    PlaceParameters(CpuOps::Get(), params);
    stashes[rank] = ForwardPlaces(router, rank, kPlaces, 1);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;

  std::vector<double> summed(kExperts, 0.0);
  for (int m = 0; m < kPlaces; ++m) {
    SCOPED_TRACE(m);
    std::vector<Scores> sc;
    for (int r = 0; r < kRanks; ++r) sc.push_back(SoftmaxScores(stashes[r][m].logits));
    std::vector<double> mean(kExperts);
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int r = 0; r < kRanks; ++r) summed[e] += sc[r].counts[e];
      mean[e] = summed[e] / (m + 1);
    }
    double together = 0.0;
    for (int r = 0; r < kRanks; ++r) together += RankLoss(mean, sc[r].s, kRanks);
    for (int r = 0; r < kRanks; ++r) {
      SCOPED_TRACE(r);
      EXPECT_NEAR(stashes[r][m].losses.global_load_balancing, together, 1e-9);
      for (int64_t i = 0; i < kTokens * kExperts; ++i) {
        std::vector<float> l = stashes[r][m].logits;
        const float h = 1e-3f;
        l[i] += h;
        const double up = RankLoss(mean, SoftmaxScores(l).s, kRanks);
        l[i] -= 2 * h;
        const double down = RankLoss(mean, SoftmaxScores(l).s, kRanks);
        EXPECT_NEAR(stashes[r][m].aux_grad[i], shape.global_aux_loss_coeff * (up - down) / (2 * h),
                    2e-5);
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
