#include "trainer/optimization/gradient_reduction.h"

#include "base/status_macros.h"
#include "parallel/tensor_buffer.h"

namespace conveyor {

GradientReduction::GradientReduction(Communicator& dp, const OptimizerOps& ops, bool in_bf16,
                                     int64_t largest_bucket)
    : dp_(dp), ops_(ops) {
  if (in_bf16 && dp.size() > 1) {
    staging_ = Tensor::Zeros({largest_bucket}, MemoryCategory::kGrads, DType::kBFloat16,
                             ops.device());
  }
}

absl::Status GradientReduction::AllReduce(Tensor buffer, int64_t start, int64_t count) {
  const Buffer grads = TensorBuffer(buffer).Slice(start, count);
  if (staging_.empty()) return dp_.AllReduceSum(grads);
  const Buffer staged = TensorBuffer(staging_).Slice(0, count);
  auto* bf16 = static_cast<BFloat16*>(staged.data);
  ops_.RoundToBFloat16(static_cast<const float*>(grads.data), bf16, count);
  RETURN_IF_ERROR(dp_.AllReduceSum(staged));
  ops_.WidenFromBFloat16(bf16, static_cast<float*>(grads.data), count);
  return absl::OkStatus();
}

absl::Status GradientReduction::ReduceScatter(Tensor buffer, int64_t start, int64_t count) {
  const int64_t slice = count / dp_.size();
  const int64_t owned = dp_.rank() * slice;
  const Buffer grads = TensorBuffer(buffer).Slice(start, count);
  if (staging_.empty()) return dp_.ReduceScatterSum(grads, grads.Slice(owned, slice));
  const Buffer staged = TensorBuffer(staging_).Slice(0, count);
  ops_.RoundToBFloat16(static_cast<const float*>(grads.data), static_cast<BFloat16*>(staged.data),
                       count);
  RETURN_IF_ERROR(dp_.ReduceScatterSum(staged, staged.Slice(owned, slice)));
  ops_.WidenFromBFloat16(static_cast<const BFloat16*>(staged.Slice(owned, slice).data),
                         static_cast<float*>(grads.Slice(owned, slice).data), slice);
  return absl::OkStatus();
}

}  // namespace conveyor
