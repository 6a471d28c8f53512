#include "model/tensor_parallel.h"

#include "base/status_macros.h"
#include "parallel/tensor_buffer.h"

namespace conveyor {

// Tensors travel in their own dtype: bf16 as bf16, summed in rank order with fp32
// accumulation and one rounding (parallel/communicator.h), what the widened sum did.

absl::Status TensorParallel::AllReduce(Tensor& t) const {
  if (size() == 1) return absl::OkStatus();
  return comm()->AllReduceSum(TensorBuffer(t));
}

absl::StatusOr<Tensor> TensorParallel::GatherRows(const Tensor& shard) const {
  if (size() == 1) return shard;
  Tensor full = Tensor::Uninitialized({shard.dim(0) * size(), shard.dim(1)}, shard.category(),
                                      shard.dtype(), shard.device());
  RETURN_IF_ERROR(comm()->AllGather(TensorBuffer(shard), TensorBuffer(full)));
  return full;
}

absl::StatusOr<Tensor> TensorParallel::ReduceScatterRows(const Tensor& full) const {
  if (size() == 1) return full;
  Tensor shard = Tensor::Uninitialized({full.dim(0) / size(), full.dim(1)}, full.category(),
                                       full.dtype(), full.device());
  RETURN_IF_ERROR(comm()->ReduceScatterSum(TensorBuffer(full), TensorBuffer(shard)));
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
  if (size() == 1) return dx;
  if (sequence_parallel_) return ReduceScatterRows(dx);
  RETURN_IF_ERROR(AllReduce(dx));
  return dx;
}

absl::StatusOr<Tensor> TensorParallel::ExitForward(Tensor y) const {
  return EnterBackward(std::move(y));  // the same collective: sum partial products
}

absl::StatusOr<Tensor> TensorParallel::ExitBackward(const Tensor& dy) const {
  return EnterForward(dy);
}

Sharding Fc1Sharding(int64_t ffn, bool swiglu, const TensorParallel& tp) {
  const int64_t slice = ffn / tp.size();
  const int64_t start = tp.rank() * slice;
  if (!swiglu) return {0, {{start, slice}}};
  return {0, {{start, slice}, {ffn + start, slice}}};
}

}  // namespace conveyor
