// RunsForSharding describes exactly the elements GlobalIndices lists, in the same
// order, for every kind of Sharding the model uses, in about one run per range.
#include "trainer/checkpoint/sharding_runs.h"

#include <vector>

#include "gtest/gtest.h"
#include "model/parameter.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"

namespace conveyor {
namespace {

using testing_util::ExpandRuns;

struct Case {
  std::vector<int64_t> shape;
  Sharding sharding;
  size_t max_runs;
};

TEST(ShardingRunsTest, AgreesWithGlobalIndices) {
  const std::vector<Case> cases = {
      {{6, 4}, Sharding::Replicated(), 1},
      {{8, 4}, Sharding::Block(0, 8, 2, 1), 1},     // column-parallel weight
      {{6, 8}, Sharding::Block(1, 8, 4, 2), 1},     // row-parallel weight: strided
      {{8}, Sharding::Block(0, 8, 2, 0), 1},        // column-parallel bias
      {{16, 4}, {0, {{2, 2}, {10, 2}}}, 2},         // SwiGLU fc1: gate and up rows
      {{4, 16}, {1, {{2, 2}, {10, 2}}}, 8},         // two ranges along columns
      {{3, 4, 5}, Sharding::Block(1, 4, 2, 1), 1},  // a middle dimension
      {{8, 4}, {0, {{0, 8}}}, 1},                   // one full range
  };
  ParameterStore store(1);
  int k = 0;
  for (const Case& c : cases) {
    Parameter* p =
        store.Add("p" + std::to_string(k++), c.shape, {InitKind::kZeros}, false, c.sharding);
    const std::vector<IndexRun> runs = RunsForSharding(c.shape, c.sharding);
    EXPECT_EQ(ExpandRuns(runs), GlobalIndices(*p)) << p->name;
    EXPECT_LE(runs.size(), c.max_runs) << p->name;
    const TensorShardRef ref = ShardRefFor(*p);
    EXPECT_EQ(ref.n, p->value.numel());
    EXPECT_EQ(ref.data, p->value.data());
    EXPECT_EQ(ref.global_shape, c.shape);
  }
}

TEST(ShardingRunsTest, OptimizerStateSharesTheParameterLayout) {
  ParameterStore store(1);
  Parameter* p = store.Add("layers.0.mlp.fc2.weight", {4, 8}, {InitKind::kZeros}, true,
                           Sharding::Block(1, 8, 2, 0));
  std::vector<float> exp_avg(p->value.numel());
  const TensorShardRef ref =
      ShardRefFor(*p, "optimizer.exp_avg/layers.0.mlp.fc2.weight", exp_avg.data());
  EXPECT_EQ(ref.name, "optimizer.exp_avg/layers.0.mlp.fc2.weight");
  EXPECT_EQ(ExpandRuns(ref.runs), GlobalIndices(*p));
  EXPECT_EQ(ref.data, exp_avg.data());
}

}  // namespace
}  // namespace conveyor
