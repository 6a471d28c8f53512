#include "model/tensor_parallel.h"

namespace conveyor {

absl::Status TensorParallel::AllReduce(float* data, int64_t n) const {
  if (size() == 1) return absl::OkStatus();
  return comm_->AllReduceSum(data, n);
}

absl::StatusOr<Tensor> TensorParallel::GatherRows(const Tensor& shard) const {
  if (size() == 1) return shard;
  Tensor full = Tensor::Zeros({shard.dim(0) * size(), shard.dim(1)}, shard.category(),
                              shard.dtype(), shard.device());
  absl::Status s = comm_->AllGather(shard.data(), shard.numel(), full.data());
  if (!s.ok()) return s;
  return full;
}

absl::StatusOr<Tensor> TensorParallel::ReduceScatterRows(const Tensor& full) const {
  if (size() == 1) return full;
  Tensor shard = Tensor::Zeros({full.dim(0) / size(), full.dim(1)}, full.category(), full.dtype(),
                               full.device());
  absl::Status s = comm_->ReduceScatterSum(full.data(), shard.numel(), shard.data());
  if (!s.ok()) return s;
  return shard;
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
  if (sequence_parallel_) return ReduceScatterRows(dx);
  absl::Status s = AllReduce(dx.data(), dx.numel());
  if (!s.ok()) return s;
  return dx;
}

absl::StatusOr<Tensor> TensorParallel::ExitForward(Tensor y) const {
  return EnterBackward(std::move(y));  // the same collective: sum partial products
}

absl::StatusOr<Tensor> TensorParallel::ExitBackward(const Tensor& dy) const {
  return EnterForward(dy);
}

}  // namespace conveyor
