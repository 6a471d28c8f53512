#include "runtime/tensor.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "runtime/dtype.h"

namespace conveyor {
namespace {

TEST(TensorTest, BytesAreTrackedByCategoryWithPeaks) {
  MemoryTracker& m = MemoryTracker::Global();
  m.ResetPeaks();
  const int64_t base = m.live_bytes(MemoryCategory::kActivations);
  {
    Tensor a = Tensor::Zeros({4, 8}, MemoryCategory::kActivations);
    Tensor b = Tensor::Zeros({16}, MemoryCategory::kActivations, DType::kBFloat16);
    EXPECT_EQ(a.nbytes(), 128);
    EXPECT_EQ(b.nbytes(), 32);
    EXPECT_EQ(m.live_bytes(MemoryCategory::kActivations), base + 160);
    Tensor shared = a;  // shares storage: no new bytes
    EXPECT_EQ(m.live_bytes(MemoryCategory::kActivations), base + 160);
  }
  EXPECT_EQ(m.live_bytes(MemoryCategory::kActivations), base);
  EXPECT_EQ(m.peak_bytes(MemoryCategory::kActivations), base + 160);
}

TEST(TensorTest, CloneCopiesIntoItsCategory) {
  Tensor a = Tensor::Zeros({3}, MemoryCategory::kWeights);
  a.data()[1] = 2.5f;
  Tensor c = a.Clone(MemoryCategory::kOptimizer);
  a.data()[1] = 0.0f;
  EXPECT_EQ(c.data()[1], 2.5f);
  EXPECT_EQ(c.category(), MemoryCategory::kOptimizer);
  EXPECT_EQ(c.ShapeString(), "[3]");
}

TEST(TensorTest, ViewsShareStorageAndAddNoBytes) {
  MemoryTracker& m = MemoryTracker::Global();
  const int64_t base = m.live_bytes(MemoryCategory::kGrads);
  Tensor view;
  {
    Tensor flat = Tensor::Zeros({10}, MemoryCategory::kGrads);
    view = flat.View(4, {2, 3});
    EXPECT_EQ(m.live_bytes(MemoryCategory::kGrads), base + 40);
    view.data()[0] = 7.0f;
    view.data()[5] = 9.0f;
    EXPECT_EQ(flat.data()[4], 7.0f);
    EXPECT_EQ(flat.data()[9], 9.0f);
    EXPECT_EQ(view.ShapeString(), "[2, 3]");
    EXPECT_EQ(view.category(), MemoryCategory::kGrads);
  }
  // The view keeps the whole buffer alive; the bytes go with the last holder.
  EXPECT_EQ(m.live_bytes(MemoryCategory::kGrads), base + 40);
  EXPECT_EQ(view.data()[5], 9.0f);
  view = Tensor();
  EXPECT_EQ(m.live_bytes(MemoryCategory::kGrads), base);

  Tensor half = Tensor::Zeros({6}, MemoryCategory::kGrads, DType::kBFloat16);
  const Tensor tail = half.View(2, {4});
  EXPECT_EQ(static_cast<const char*>(tail.raw()) - static_cast<const char*>(half.raw()), 4);
  EXPECT_EQ(tail.nbytes(), 8);
}

TEST(TensorTest, UninitializedHostTensorsReadAsNaN) {
  // So that an op reading an element before anything wrote it fails the CPU tests.
  Tensor fp32 = Tensor::Uninitialized({5}, MemoryCategory::kActivations);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(std::isnan(fp32.data()[i])) << i;
  Tensor bf16 = Tensor::Uninitialized({3}, MemoryCategory::kActivations, DType::kBFloat16);
  const auto* elements = static_cast<const BFloat16*>(bf16.raw());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(ToFloat(elements[i]))) << i;
}

TEST(TensorTest, OutOfHostMemoryEndsNamingTheSizeAndTheFlags) {
  EXPECT_EXIT(Tensor::Zeros({int64_t{1} << 58}, MemoryCategory::kActivations),
              testing::ExitedWithCode(1),
              "out of host memory allocating 1152921504606846976 bytes.*--dry-run.*"
              "--micro-batch-size");
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(ToBFloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties go to the even (1.0).
  EXPECT_EQ(ToBFloat16(1.0f + 1.0f / 256).bits, 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(ToBFloat16(1.0f + 3.0f / 256).bits, 0x3f82);
  EXPECT_EQ(ToFloat(ToBFloat16(-2.0f)), -2.0f);
  EXPECT_TRUE(std::isnan(ToFloat(ToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(ToFloat(ToBFloat16(std::numeric_limits<float>::infinity()))));
}

}  // namespace
}  // namespace conveyor
