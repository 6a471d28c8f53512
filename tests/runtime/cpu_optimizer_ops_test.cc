// The CPU optimizer reductions (runtime/cpu/cpu_optimizer_ops.h): the gradient norm's
// sum of squares against an 80-bit long double sum written here, over arrays whose
// sizes end inside a vector block and inside a pool chunk, and the same bits whatever
// the pool's thread count; the zero count exact.
#include "runtime/cpu/cpu_optimizer_ops.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor {
namespace {

constexpr int64_t kSizes[] = {0, 1, 15, 17, 16385, 1000003, 300001};

std::vector<std::vector<float>> RandomArrays() {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> arrays;
  for (const int64_t n : kSizes) {
    arrays.emplace_back(n);
    for (float& x : arrays.back()) x = normal(gen);
  }
  return arrays;
}

std::vector<FloatArray> Views(const std::vector<std::vector<float>>& arrays) {
  std::vector<FloatArray> views;
  for (const std::vector<float>& a : arrays) {
    views.push_back({a.data(), static_cast<int64_t>(a.size())});
  }
  return views;
}

class CpuOptimizerOpsTest : public ::testing::Test {
 protected:
  ~CpuOptimizerOpsTest() override { cpu::SetPoolThreads(cpu::UsableCpus()); }
};

TEST_F(CpuOptimizerOpsTest, SumOfSquaresMatchesLongDouble) {
  const std::vector<std::vector<float>> arrays = RandomArrays();
  long double want = 0.0L;
  for (const std::vector<float>& a : arrays) {
    for (const float x : a) want += static_cast<long double>(x) * x;
  }
  const double got = CpuOptimizerOps::Get().SumOfSquares(Views(arrays));
  EXPECT_NEAR(got, static_cast<double>(want), 1e-14 * static_cast<double>(want));
  // One array alone, and a tail shorter than a vector block.
  EXPECT_EQ(CpuOptimizerOps::Get().SumOfSquares({{arrays[1].data(), 1}}),
            static_cast<double>(arrays[1][0]) * arrays[1][0]);
  EXPECT_EQ(CpuOptimizerOps::Get().SumOfSquares({}), 0.0);
}

TEST_F(CpuOptimizerOpsTest, SumOfSquaresIsTheSameOnAnyThreadCount) {
  const std::vector<std::vector<float>> arrays = RandomArrays();
  cpu::SetPoolThreads(1);
  const double one = CpuOptimizerOps::Get().SumOfSquares(Views(arrays));
  for (const int threads : {2, 3, 5}) {
    cpu::SetPoolThreads(threads);
    EXPECT_EQ(CpuOptimizerOps::Get().SumOfSquares(Views(arrays)), one) << threads << " threads";
  }
}

TEST_F(CpuOptimizerOpsTest, CountZerosCountsEveryArray) {
  std::vector<std::vector<float>> arrays = RandomArrays();
  int64_t want = 0;
  for (std::vector<float>& a : arrays) {
    for (size_t i = 0; i < a.size(); i += 7) {
      a[i] = (i / 7) % 2 == 0 ? 0.0f : -0.0f;  // both zeros count
      ++want;
    }
  }
  cpu::SetPoolThreads(2);
  EXPECT_EQ(CpuOptimizerOps::Get().CountZeros(Views(arrays)), want);
}

}  // namespace
}  // namespace conveyor
