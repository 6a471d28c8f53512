#include "model/tensor_parallel.h"

namespace conveyor {

// The communicators move fp32 (gloo has no bf16 sum), so a bf16 tensor travels widened
// and is rounded back afterwards: a bf16 collective with fp32 accumulation.
Tensor TensorParallel::WideZeros(int64_t rows, const Tensor& like) {
  return Tensor::Zeros({rows, like.dim(1)}, like.category(), DType::kFloat32, like.device());
}

absl::Status TensorParallel::AllReduce(float* data, int64_t n) const {
  if (size() == 1) return absl::OkStatus();
  return comm_->AllReduceSum(data, n);
}

absl::StatusOr<Tensor> TensorParallel::GatherRows(const Tensor& shard) const {
  if (size() == 1) return shard;
  const Tensor wide = ops_->CastTo(shard, DType::kFloat32);
  Tensor full = WideZeros(shard.dim(0) * size(), shard);
  absl::Status s = comm_->AllGather(wide.data(), wide.numel(), full.data());
  if (!s.ok()) return s;
  return ops_->CastTo(full, shard.dtype());
}

absl::StatusOr<Tensor> TensorParallel::ReduceScatterRows(const Tensor& full) const {
  if (size() == 1) return full;
  const Tensor wide = ops_->CastTo(full, DType::kFloat32);
  Tensor shard = WideZeros(full.dim(0) / size(), full);
  absl::Status s = comm_->ReduceScatterSum(wide.data(), shard.numel(), shard.data());
  if (!s.ok()) return s;
  return ops_->CastTo(shard, full.dtype());
}

Tensor TensorParallel::ScatterRows(const Tensor& full) const {
  if (size() == 1) return full;
  Tensor shard = Tensor::Zeros({full.dim(0) / size(), full.dim(1)}, full.category(), full.dtype(),
                               full.device());
  const auto* first = static_cast<const char*>(full.raw()) + rank() * shard.nbytes();
  MemoryOf(full.device()).Copy(shard.raw(), first, shard.nbytes());
  return shard;
}

absl::StatusOr<Tensor> TensorParallel::EnterForward(const Tensor& x) const {
  return sequence_parallel_ ? GatherRows(x) : x;
}

absl::StatusOr<Tensor> TensorParallel::EnterBackward(Tensor dx) const {
  if (size() == 1) return dx;
  if (sequence_parallel_) return ReduceScatterRows(dx);
  Tensor wide = ops_->CastTo(dx, DType::kFloat32);
  absl::Status s = AllReduce(wide.data(), wide.numel());
  if (!s.ok()) return s;
  return ops_->CastTo(wide, dx.dtype());
}

absl::StatusOr<Tensor> TensorParallel::ExitForward(Tensor y) const {
  return EnterBackward(std::move(y));  // the same collective: sum partial products
}

absl::StatusOr<Tensor> TensorParallel::ExitBackward(const Tensor& dy) const {
  return EnterForward(dy);
}

}  // namespace conveyor
