// The process groups a rank's part of the model communicates over, as one set (Megatron
// core's ProcessGroupCollection). Every member is a real group: a dimension of size one
// is a group of one rank (parallel/self_communicator.h), so the model never tests for a
// missing group and a new parallel dimension is a new field here. Which ranks each group
// holds is Megatron's layout (parallel/rank_layout.h, docs/design.md §9); the groups are
// built once per rank (parallel/parallel_state.h) or, for a model on one rank, by
// SingleRankGroups.
#ifndef CONVEYOR_MODEL_MODEL_GROUPS_H_
#define CONVEYOR_MODEL_MODEL_GROUPS_H_

#include "parallel/communicator.h"
#include "parallel/self_communicator.h"

namespace conveyor {

// None null; each must outlive whatever holds the set.
struct ModelGroups {
  // Tensor parallelism: the layers' column- and row-parallel regions
  // (model/tensor_parallel.h).
  Communicator* tp;
  // Context parallelism: the ring of ranks that share each sample's tokens
  // (model/context_shard.h, model/ring_attention.h).
  Communicator* cp;
  // Expert parallelism: the ranks the routed experts are spread over
  // (model/routed_experts.h).
  Communicator* ep;
  // Expert tensor parallelism: the group that splits each expert like the dense MLP
  // (--expert-tensor-parallel-size; the tensor-parallel group itself when it is as large).
  // Smaller than TP, its copies in a TP group share each expert's rows
  // (model/expert_row_share.h).
  Communicator* etp;
  // Data parallelism (with the expert-parallel ranks in it), over which
  // --moe-router-load-balancing-type global_aux_loss sums each micro-batch's expert load
  // (model/moe_global_load.h).
  Communicator* dp;
};

// The groups of a model on one rank: each a group of one that this object owns.
class SingleRankGroups {
 public:
  SingleRankGroups() = default;
  // The set points into this object.
  SingleRankGroups(const SingleRankGroups&) = delete;
  SingleRankGroups& operator=(const SingleRankGroups&) = delete;

  ModelGroups groups() { return {&tp_, &cp_, &ep_, &etp_, &dp_}; }

 private:
  SelfCommunicator tp_{"tp[0]"};
  SelfCommunicator cp_{"cp[0]"};
  SelfCommunicator ep_{"ep[0]"};
  SelfCommunicator etp_{"etp[0]"};
  SelfCommunicator dp_{"dp[0]"};
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MODEL_GROUPS_H_
