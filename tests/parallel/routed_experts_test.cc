// A mixture of experts' routed experts under expert parallelism against the same experts
// on one rank: two forked ranks each hold two of four experts (EP 2) and send their own
// dispatched rows (uneven per expert, one expert getting none from a rank); each rank's
// outputs and input gradients must equal the one-rank experts' on its rows, and each local
// expert's weight gradient the one-rank gradient accumulated over both ranks' rows.
// Then expert tensor parallelism below TP: two tensor-parallel ranks with whole experts
// (ETP 1) hold the same rows and share them, so their outputs, input gradients and weight
// gradients summed over the two equal the one-rank experts'.
#include "model/routed_experts.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "model/model_groups.h"
#include "parallel/launcher.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/parallel/multi_rank.h"

namespace conveyor {
namespace {

using testing_util::Fail;

constexpr int kRanks = 2;
constexpr int64_t kExperts = 4;
constexpr int64_t kHidden = 6;
constexpr int64_t kFfn = 5;
constexpr uint64_t kSeed = 7;

// Rank r's dispatched rows per expert (rank 1 sends expert 1 nothing).
std::vector<int64_t> ExpertBegin(int r) {
  const std::vector<std::vector<int64_t>> rows = {{3, 1, 2, 4}, {2, 0, 5, 1}};
  std::vector<int64_t> begin = {0};
  for (int64_t n : rows[r]) begin.push_back(begin.back() + n);
  return begin;
}

// A [rows, hidden] tensor of smooth values that differ per rank and per use (`salt`).
Tensor RankRows(int r, int salt) {
  const int64_t rows = ExpertBegin(r).back();
  Tensor t = Tensor::Zeros({rows, kHidden}, MemoryCategory::kActivations);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data()[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * r + 0.71 * salt));
  }
  return t;
}

bool Near(const Tensor& a, const Tensor& b, std::string* where) {
  if (a.numel() != b.numel()) {
    *where = absl::StrCat("sizes ", a.numel(), " vs ", b.numel());
    return false;
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::fabs(a.data()[i] - b.data()[i]) > 1e-5f * (1.0f + std::fabs(b.data()[i]))) {
      *where = absl::StrCat("element ", i, ": ", a.data()[i], " vs ", b.data()[i]);
      return false;
    }
  }
  return true;
}

int CheckExpertParallel(const RankEnvironment& env, bool swiglu) {
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> world =
      testing_util::ConnectWorld(env, absl::Seconds(20));
  if (!world.ok()) return Fail(env, world.status().ToString());
  const Ops* ops = &CpuOps::Get();
  const TensorParallel one_tp;
  const int me = env.rank;

  // The reference: all four experts here, run on both ranks' rows in turn.
  ParameterStore reference_store(kSeed);
  RoutedExperts reference(ops, &reference_store, "experts", kExperts, kHidden, kFfn, swiglu, 0.5f,
                          0.3f, one_tp);
  Tensor expected_out, expected_dx;
  for (int r = 0; r < kRanks; ++r) {
    RoutedExpertsStash stash;
    absl::StatusOr<Tensor> y = reference.Forward(RankRows(r, 0), ExpertBegin(r), &stash);
    absl::StatusOr<Tensor> dx = reference.BackwardInput(RankRows(r, 1), &stash);
    if (!y.ok() || !dx.ok()) return Fail(env, "the one-rank experts failed");
    if (r == me) {
      expected_out = y->Clone(MemoryCategory::kActivations);
      expected_dx = dx->Clone(MemoryCategory::kActivations);
    }
    reference.BackwardWeight(&stash);
  }

  ParameterStore store(kSeed);
  SingleRankGroups others;
  ModelGroups groups = others.groups();
  groups.ep = world->get();
  const TensorParallel expert_parallel(groups, /*sequence_parallel=*/false);
  RoutedExperts experts(ops, &store, "experts", kExperts, kHidden, kFfn, swiglu, 0.5f, 0.3f,
                        expert_parallel);
  if (experts.local().first != 2 * me || experts.local().count != 2) {
    return Fail(env, "local experts");
  }
  RoutedExpertsStash stash;
  absl::StatusOr<Tensor> y = experts.Forward(RankRows(me, 0), ExpertBegin(me), &stash);
  if (!y.ok()) return Fail(env, y.status().ToString());
  std::string where;
  if (!Near(*y, expected_out, &where)) return Fail(env, "forward output: " + where);
  absl::StatusOr<Tensor> dx = experts.BackwardInput(RankRows(me, 1), &stash);
  if (!dx.ok()) return Fail(env, dx.status().ToString());
  if (!Near(*dx, expected_dx, &where)) return Fail(env, "input gradient: " + where);
  experts.BackwardWeight(&stash);

  std::vector<Parameter*> local;
  experts.AppendParameters(&local);
  if (local.size() != 4) return Fail(env, "expected fc1 and fc2 of two experts");
  for (Parameter* p : local) {
    if (p->name.rfind(absl::StrCat("experts.", 2 * me), 0) != 0 &&
        p->name.rfind(absl::StrCat("experts.", 2 * me + 1), 0) != 0) {
      return Fail(env, "a parameter of another rank's expert: " + p->name);
    }
    const Parameter* ref = reference_store.Find(p->name);
    if (ref == nullptr) return Fail(env, "no reference parameter " + p->name);
    if (!Near(p->value, ref->value, &where)) return Fail(env, p->name + " value: " + where);
    if (!Near(p->grad, ref->grad, &where)) return Fail(env, p->name + " gradient: " + where);
  }
  return 0;
}

// Sums `t` over the world in place.
bool SumOverRanks(Communicator& world, Tensor& t) {
  return world.AllReduceSum(t.data(), t.numel()).ok();
}

int CheckRowSharing(const RankEnvironment& env, bool swiglu) {
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> world =
      testing_util::ConnectWorld(env, absl::Seconds(20));
  if (!world.ok()) return Fail(env, world.status().ToString());
  const Ops* ops = &CpuOps::Get();
  // Both ranks run rank 0's rows (expert 1's single row falls to one of them).
  ParameterStore reference_store(kSeed);
  RoutedExperts reference(ops, &reference_store, "experts", kExperts, kHidden, kFfn, swiglu, 0.5f,
                          0.3f, TensorParallel());
  RoutedExpertsStash reference_stash;
  absl::StatusOr<Tensor> expected_out =
      reference.Forward(RankRows(0, 0), ExpertBegin(0), &reference_stash);
  absl::StatusOr<Tensor> expected_dx = reference.BackwardInput(RankRows(0, 1), &reference_stash);
  if (!expected_out.ok() || !expected_dx.ok()) return Fail(env, "the one-rank experts failed");
  reference.BackwardWeight(&reference_stash);

  ParameterStore store(kSeed);
  SingleRankGroups others;  // whole experts: expert TP of one
  ModelGroups groups = others.groups();
  groups.tp = world->get();
  const TensorParallel tp(groups, /*sequence_parallel=*/false);
  RoutedExperts experts(ops, &store, "experts", kExperts, kHidden, kFfn, swiglu, 0.5f, 0.3f, tp);
  RoutedExpertsStash stash;
  absl::StatusOr<Tensor> y = experts.Forward(RankRows(0, 0), ExpertBegin(0), &stash);
  if (!y.ok() || !SumOverRanks(**world, *y)) return Fail(env, "forward");
  std::string where;
  if (!Near(*y, *expected_out, &where)) return Fail(env, "summed forward output: " + where);
  absl::StatusOr<Tensor> dx = experts.BackwardInput(RankRows(0, 1), &stash);
  if (!dx.ok() || !SumOverRanks(**world, *dx)) return Fail(env, "backward");
  if (!Near(*dx, *expected_dx, &where)) return Fail(env, "summed input gradient: " + where);
  experts.BackwardWeight(&stash);
  std::vector<Parameter*> params;
  experts.AppendParameters(&params);
  if (params.size() != 2 * kExperts) return Fail(env, "expected every expert, whole");
  for (Parameter* p : params) {
    if (!p->expert_parallel) return Fail(env, p->name + " is not reduced as an expert's");
    const Parameter* ref = reference_store.Find(p->name);
    if (ref == nullptr || !SumOverRanks(**world, p->grad)) return Fail(env, p->name);
    if (!Near(p->value, ref->value, &where)) return Fail(env, p->name + " value: " + where);
    if (!Near(p->grad, ref->grad, &where)) return Fail(env, p->name + " summed gradient: " + where);
  }
  return 0;
}

TEST(RoutedExpertsTest, TensorParallelRanksShareTheRowsOfWholeExperts) {
  for (const bool swiglu : {false, true}) {
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        kRanks, [swiglu](const RankEnvironment& env) { return CheckRowSharing(env, swiglu); }, err);
    EXPECT_EQ(code, 0) << (swiglu ? "SwiGLU: " : "GELU: ") << err.str();
  }
}

TEST(RoutedExpertsTest, TwoExpertParallelRanksMatchOneRank) {
  for (const bool swiglu : {false, true}) {
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        kRanks, [swiglu](const RankEnvironment& env) { return CheckExpertParallel(env, swiglu); },
        err);
    EXPECT_EQ(code, 0) << (swiglu ? "SwiGLU: " : "GELU: ") << err.str();
  }
}

}  // namespace
}  // namespace conveyor
