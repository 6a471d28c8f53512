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
#include "model/parameter.h"
#include "parallel/self_communicator.h"
#include "runtime/tensor.h"

namespace conveyor {

// The groups of Megatron's expert layout (parallel/rank_layout.h) that a rank's routed
// experts use besides the tensor-parallel group.
struct ExpertGroups {
  // The expert-parallel group, which spreads the experts over its ranks (null: one rank).
  Communicator* ep = nullptr;
  // The expert-tensor-parallel group, which splits each expert like the dense MLP
  // (--expert-tensor-parallel-size; null: the tensor-parallel group itself). Smaller
  // than TP, its copies in a TP group share each expert's rows (model/expert_row_share.h).
  Communicator* etp = nullptr;
  // The data-parallel group (with the expert-parallel ranks in it), over which
  // --moe-router-load-balancing-type global_aux_loss sums each micro-batch's expert load
  // (model/moe_global_load.h; null: one rank).
  Communicator* dp = nullptr;
};

class TensorParallel {
 public:
  // One rank, in a group of one it owns.
  TensorParallel()
      : own_group_(std::make_unique<SelfCommunicator>("tp[0]")), comm_(own_group_.get()) {}
  // `comm` is the tensor-parallel group; it must outlive this object. Tensors cross it
  // in their own dtype (bf16 as bf16). `experts` are the groups a mixture of experts'
  // routed experts use, so that an MoE layer reaches all its groups through this object;
  // they must outlive it too.
  TensorParallel(Communicator* comm, bool sequence_parallel, ExpertGroups experts = {})
      : comm_(comm),
        sequence_parallel_(sequence_parallel && comm->size() > 1),
        experts_(experts) {}

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  bool sequence_parallel() const { return sequence_parallel_; }
  // This rank's first row among the micro-batch's rows (before TP), holding `shard_rows`
  // of them: its sequence shard under SP, else all of them.
  int64_t FirstShardRow(int64_t shard_rows) const {
    return sequence_parallel_ ? rank() * shard_rows : 0;
  }
  Communicator* comm() const { return comm_; }
  const ExpertGroups& experts() const { return experts_; }

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
  std::unique_ptr<Communicator> own_group_;  // the default constructor's group of one
  Communicator* comm_ = nullptr;
  bool sequence_parallel_ = false;
  ExpertGroups experts_;
};

// The part of a column-parallel MLP's fc1 ([fc1 width, hidden], an MLP of width `ffn`)
// that `tp`'s rank holds: a block of ffn / TP rows, or under SwiGLU, whose rows are
// [gate | up], that block of each half, so that the activation pairs them locally.
Sharding Fc1Sharding(int64_t ffn, bool swiglu, const TensorParallel& tp);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_TENSOR_PARALLEL_H_
