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
#include "model/model_groups.h"
#include "model/parameter.h"
#include "parallel/communicator.h"
#include "runtime/tensor.h"

namespace conveyor {

class TensorParallel {
 public:
  // One rank: every group of the model a group of one that this object owns.
  TensorParallel()
      : own_groups_(std::make_unique<SingleRankGroups>()), groups_(own_groups_->groups()) {}
  // `groups.tp` is the tensor-parallel group. Tensors cross it in their own dtype (bf16
  // as bf16). The other groups ride along, so that a layer reaches all the model's groups
  // through this object (a mixture of experts' routed experts, context parallelism's
  // ring); they must all outlive it.
  TensorParallel(const ModelGroups& groups, bool sequence_parallel)
      : groups_(groups), sequence_parallel_(sequence_parallel && groups.tp->size() > 1) {}

  int rank() const { return groups_.tp->rank(); }
  int size() const { return groups_.tp->size(); }
  bool sequence_parallel() const { return sequence_parallel_; }
  // This rank's first row among the micro-batch's rows (before TP), holding `shard_rows`
  // of them: its sequence shard under SP, else all of them.
  int64_t FirstShardRow(int64_t shard_rows) const {
    return sequence_parallel_ ? rank() * shard_rows : 0;
  }
  Communicator* comm() const { return groups_.tp; }
  const ModelGroups& groups() const { return groups_; }

  absl::StatusOr<Tensor> EnterForward(const Tensor& x) const;
  absl::StatusOr<Tensor> EnterBackward(Tensor dx) const;
  absl::StatusOr<Tensor> ExitForward(Tensor y) const;
  absl::StatusOr<Tensor> ExitBackward(const Tensor& dy) const;

  // Sum over the group in place (shares `t`'s storage: every copy of it sees the sum).
  absl::Status AllReduce(Tensor& t) const;
  absl::StatusOr<Tensor> GatherRows(const Tensor& shard) const;
  absl::StatusOr<Tensor> ReduceScatterRows(const Tensor& full) const;
  // This rank's rows of a full [tokens, width] tensor (a copy).
  Tensor ScatterRows(const Tensor& full) const;

 private:
  std::unique_ptr<SingleRankGroups> own_groups_;  // the default constructor's groups
  ModelGroups groups_;
  bool sequence_parallel_ = false;
};

// The part of a column-parallel MLP's fc1 ([fc1 width, hidden], an MLP of width `ffn`)
// that `tp`'s rank holds: a block of ffn / TP rows, or under SwiGLU, whose rows are
// [gate | up], that block of each half, so that the activation pairs them locally.
Sharding Fc1Sharding(int64_t ffn, bool swiglu, const TensorParallel& tp);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_TENSOR_PARALLEL_H_
