// Megatron's tensor-parallel communication, as the two conjugate region boundaries a
// transformer layer crosses (Shoeybi et al. 2019; Korthikanti et al. 2022 for
// sequence parallelism). Activations are [tokens, width] row-major; under
// --sequence-parallel a rank holds tokens / TP contiguous rows outside the
// tensor-parallel regions.
//
//   boundary        forward                      backward
//   Enter (before   identity | all-gather rows   all-reduce | reduce-scatter rows
//   column-parallel)
//   Exit (after     all-reduce | reduce-scatter  identity | all-gather rows
//   row-parallel)
//                   (without | with sequence parallelism)
//
// With one rank every call is the identity; the group is still a real one (of one).
#ifndef CONVEYOR_MODEL_TENSOR_PARALLEL_H_
#define CONVEYOR_MODEL_TENSOR_PARALLEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "parallel/communicator.h"
#include "parallel/self_communicator.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"

namespace conveyor {

class TensorParallel {
 public:
  // One rank, in a group of one it owns.
  TensorParallel()
      : own_group_(std::make_unique<SelfCommunicator>("tp[0]")), comm_(own_group_.get()) {}
  // `comm` is the tensor-parallel group and `ops` the model's backend (it widens bf16
  // for the communicators); both must outlive this object.
  TensorParallel(Communicator* comm, bool sequence_parallel, const Ops* ops)
      : comm_(comm), sequence_parallel_(sequence_parallel && comm->size() > 1), ops_(ops) {}

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  bool sequence_parallel() const { return sequence_parallel_; }
  Communicator* comm() const { return comm_; }

  absl::StatusOr<Tensor> EnterForward(const Tensor& x) const;
  absl::StatusOr<Tensor> EnterBackward(Tensor dx) const;
  absl::StatusOr<Tensor> ExitForward(Tensor y) const;
  absl::StatusOr<Tensor> ExitBackward(const Tensor& dy) const;

  // Sum over the group in place (vocab-parallel embedding and cross-entropy).
  absl::Status AllReduce(float* data, int64_t n) const;
  absl::StatusOr<Tensor> GatherRows(const Tensor& shard) const;
  absl::StatusOr<Tensor> ReduceScatterRows(const Tensor& full) const;
  // This rank's rows of a full [tokens, width] tensor (a copy).
  Tensor ScatterRows(const Tensor& full) const;

 private:
  // fp32 zeros shaped like `like`'s rows, on its device.
  static Tensor WideZeros(int64_t rows, const Tensor& like);

  std::unique_ptr<Communicator> own_group_;  // the default constructor's group of one
  Communicator* comm_ = nullptr;
  bool sequence_parallel_ = false;
  const Ops* ops_ = nullptr;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_TENSOR_PARALLEL_H_
