// One transformer layer: input and weight gradients (B and W, called separately)
// against central finite differences of loss = sum(out * R) for a fixed random R.
#include <vector>

#include "gtest/gtest.h"
#include "model/transformer_layer.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/philox.h"
#include "tests/model/grad_check.h"
#include "tests/model/test_shapes.h"

namespace conveyor {
namespace {

using testing_util::GradTarget;
using testing_util::ShapeVariant;

Tensor RandomTensor(std::vector<int64_t> shape, uint64_t stream, float std) {
  Tensor t = Tensor::Zeros(std::move(shape), MemoryCategory::kActivations);
  const CounterRng rng(99, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = std * rng.Normal(i);
  return t;
}

class TransformerLayerGradTest : public ::testing::TestWithParam<ShapeVariant> {};

TEST_P(TransformerLayerGradTest, InputAndWeightGradientsMatchFiniteDifferences) {
  const ModelShape shape = GetParam().shape;
  ParameterStore store(/*seed=*/11);
  RopeTable rope(shape.seq, shape.rotary_dims(), shape.rotary_base);
  const TensorParallel one_rank;
  TransformerLayer layer(&CpuOps::Get(), &store, shape, /*layer_index=*/1,
                         shape.rope ? &rope : nullptr,
                         /*seed=*/11, &one_rank);
  const MicroBatchContext mb{/*iteration=*/2, /*first_sample=*/3, /*batch=*/2, shape.seq};
  Tensor x = RandomTensor({mb.tokens(), shape.hidden}, 1, 1.0f);
  const Tensor r = RandomTensor({mb.tokens(), shape.hidden}, 2, 1.0f);
  auto loss = [&]() {
    LayerStash stash;
    const Tensor out = *layer.Forward(x, mb, &stash);
    double sum = 0.0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += double(out.data()[i]) * r.data()[i];
    return sum;
  };

  LayerStash stash;
  ASSERT_TRUE(layer.Forward(x, mb, &stash).ok());
  const Tensor dx = *layer.BackwardInput(r, mb, &stash);
  layer.BackwardWeight(&stash);

  std::vector<GradTarget> targets = testing_util::ParameterTargets(
      store.parameters(), {{"input", x.data(), dx.data(), x.numel()}});
  EXPECT_GT(testing_util::MaxAbsGradient(targets), 1e-2f);
  // The loss is a sum over ~200 outputs of size ~1, so its rounding noise is larger
  // than the model test's mean loss: allow 1e-3 absolute.
  testing_util::GradCheckOptions options;
  options.abs_tol = 1e-3f;
  options.samples_per_target = 10;
  // relu(x)^2's second derivative jumps from 0 to 2 at 0: a step of 1e-2 that straddles
  // a pre-activation's kink is off by up to ~1e-2 of its row's gradient, so a smaller step
  // (one whose rounding noise, ~2e-6 / step, stays below the tolerance).
  if (shape.squared_relu) options.eps = 3e-3f;
  for (const std::string& problem : testing_util::CheckGradients(loss, targets, options)) {
    ADD_FAILURE() << GetParam().name << ": " << problem;
  }
}

TEST(TransformerLayerTest, BackwardWeightEmptiesTheStash) {
  const ModelShape shape = testing_util::TinyShape();
  ParameterStore store(1);
  const TensorParallel one_rank;
  TransformerLayer layer(&CpuOps::Get(), &store, shape, 0, nullptr, 1, &one_rank);
  const MicroBatchContext mb{1, 0, 1, shape.seq};
  const Tensor x = RandomTensor({mb.tokens(), shape.hidden}, 1, 1.0f);
  const int64_t before = MemoryTracker::Global().live_bytes(MemoryCategory::kActivations);
  {
    LayerStash stash;
    const Tensor out = *layer.Forward(x, mb, &stash);
    EXPECT_GT(MemoryTracker::Global().live_bytes(MemoryCategory::kActivations), before);
    const Tensor dx = *layer.BackwardInput(out, mb, &stash);
    layer.BackwardWeight(&stash);
    EXPECT_TRUE(stash.x.empty());
    EXPECT_TRUE(stash.d_qkv.empty());
  }
  EXPECT_EQ(MemoryTracker::Global().live_bytes(MemoryCategory::kActivations), before);
}

INSTANTIATE_TEST_SUITE_P(AllOptions, TransformerLayerGradTest,
                         ::testing::ValuesIn(testing_util::ShapeVariants()),
                         [](const ::testing::TestParamInfo<ShapeVariant>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor
