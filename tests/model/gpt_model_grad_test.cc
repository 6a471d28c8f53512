// The whole model's gradients against central finite differences, for every
// architecture option (tolerances are justified in grad_check.h).
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/model/grad_check.h"
#include "tests/model/test_shapes.h"

namespace conveyor {
namespace {

using testing_util::GradTarget;
using testing_util::ShapeVariant;

class GptModelGradTest : public ::testing::TestWithParam<ShapeVariant> {};

TEST_P(GptModelGradTest, ParameterGradientsMatchFiniteDifferences) {
  const ModelShape shape = GetParam().shape;
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  const MicroBatchContext mb{/*iteration=*/3, /*first_sample=*/5, /*batch=*/2, shape.seq};
  std::vector<int32_t> tokens(mb.tokens()), labels(mb.tokens());
  for (int64_t i = 0; i < mb.tokens(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 11 + 3) % shape.padded_vocab);
    labels[i] = static_cast<int32_t>((i * 5 + 1) % shape.padded_vocab);
  }
  auto loss = [&]() {
    GptStash stash;
    return static_cast<double>(*model.Forward(mb, tokens.data(), labels.data(), &stash));
  };

  model.parameters().ZeroGrads();
  GptStash stash;
  ASSERT_TRUE(model.Forward(mb, tokens.data(), labels.data(), &stash).ok());
  ASSERT_TRUE(model.Backward(mb, /*loss_scale=*/1.0f, &stash).ok());

  std::vector<GradTarget> targets = testing_util::ParameterTargets(model.parameters().parameters());
  EXPECT_GT(testing_util::MaxAbsGradient(targets), 1e-2f);
  for (const std::string& problem : testing_util::CheckGradients(loss, targets)) {
    ADD_FAILURE() << GetParam().name << ": " << problem;
  }
}

TEST_P(GptModelGradTest, LossScaleScalesGradients) {
  const ModelShape shape = GetParam().shape;
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  const MicroBatchContext mb{1, 0, 1, shape.seq};
  std::vector<int32_t> tokens(mb.tokens(), 3), labels(mb.tokens(), 4);
  GptStash stash;
  ASSERT_TRUE(model.Forward(mb, tokens.data(), labels.data(), &stash).ok());
  ASSERT_TRUE(model.Backward(mb, 1.0f, &stash).ok());
  Parameter* first = model.parameters().parameters().front();
  const std::vector<float> once(first->grad.data(), first->grad.data() + first->grad.numel());
  model.parameters().ZeroGrads();
  ASSERT_TRUE(model.Forward(mb, tokens.data(), labels.data(), &stash).ok());
  ASSERT_TRUE(model.Backward(mb, 0.25f, &stash).ok());
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(first->grad.data()[i], 0.25f * once[i], 1e-6f + 1e-5f * std::fabs(once[i]));
  }
}

INSTANTIATE_TEST_SUITE_P(AllOptions, GptModelGradTest,
                         ::testing::ValuesIn(testing_util::ShapeVariants()),
                         [](const ::testing::TestParamInfo<ShapeVariant>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor
