// Parallel layouts on GPUs follow the one-GPU run of the same model: every rank on its
// own GPU, device tensors (activations, gradients, parameter shards) crossing NCCL and
// the host's bookkeeping (losses, norms, votes) crossing gloo. A layout needs one GPU
// per rank and skips otherwise: NCCL refuses two ranks of a group on one device, so a
// one-GPU machine checks nothing here.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/parallel/gpu_count.h"
#include "tests/trainer/layout_runs.h"

namespace conveyor::testing_util {
namespace {

struct CudaLayoutCase {
  Layout layout;
  double loss_tolerance;  // relative, per iteration
  double norm_tolerance;
};

class CudaParallelTrainingTest : public ::testing::TestWithParam<CudaLayoutCase> {};

TEST_P(CudaParallelTrainingTest, FollowsOneGpu) {
  const Layout& layout = GetParam().layout;
  const int ranks = layout.tp * layout.pp * layout.dp;
  std::string why;
  const int gpus = testing_util::CountGpusInChild(&why);
  if (gpus < ranks) {
    GTEST_SKIP() << LayoutName(layout) << " needs " << ranks << " GPUs, one per rank; found "
                 << gpus << (gpus == 0 ? " (" + why + ")" : "");
  }
  absl::StatusOr<LayoutRun> reference =
      RunLayout(TinyConfig(OneRank(layout)), "reference_" + LayoutName(layout));
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(layout), LayoutName(layout));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, *reference, GetParam().loss_tolerance, GetParam().norm_tolerance);
}

std::vector<CudaLayoutCase> CudaLayouts() {
  auto on_gpu = [](Layout l, bool bf16) {
    l.device = "cuda";
    l.bf16 = bf16;
    return l;
  };
  // fp32: only summation orders differ (split GEMMs, NCCL's ring). bf16: roundings at
  // other places than one GPU's, compounded over the steps (as Bf16EquivalenceTest).
  const double fp32[] = {1e-4, 1e-3};
  const double bf16[] = {1e-2, 5e-2};
  Layout llama = TpDp(2, 1, true, false);
  llama.llama = true;
  Layout tp_pp = Pipeline(2, "zb-h1", 1, 2);
  tp_pp.tp = 2;
  Layout qk_norm = TpDp(2, 1, false, false);  // --qk-layernorm: the norms' TP sum on NCCL
  qk_norm.qk_layernorm = true;
  return {
      {on_gpu(TpDp(2, 1, false, false), false), fp32[0], fp32[1]},
      {on_gpu(TpDp(2, 1, true, false), true), bf16[0], bf16[1]},
      {on_gpu(TpDp(1, 2, false, true), false), fp32[0], fp32[1]},
      {on_gpu(TpDp(1, 2, false, true), true), bf16[0], bf16[1]},
      {on_gpu(Pipeline(2, "1f1b", 1, 2), false), fp32[0], fp32[1]},
      {on_gpu(Pipeline(2, "interleaved-1f1b", 2, 4), true), bf16[0], bf16[1]},
      {on_gpu(llama, true), bf16[0], bf16[1]},
      {on_gpu(tp_pp, true), bf16[0], bf16[1]},
      {on_gpu(qk_norm, false), fp32[0], fp32[1]},
  };
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudaParallelTrainingTest, ::testing::ValuesIn(CudaLayouts()),
                         [](const ::testing::TestParamInfo<CudaLayoutCase>& test) {
                           return LayoutName(test.param.layout);
                         });

}  // namespace
}  // namespace conveyor::testing_util
