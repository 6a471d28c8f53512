// One rank's place in the job and the groups it talks through, built once from the
// ParallelState and the config, and handed by reference to every part of the rank's
// training (updaters, checkpoints, the executor, evaluation), as Megatron hands one
// process-group collection to every schedule. A group of one is a real group (a
// SelfCommunicator), never null, so no caller asks whether a group exists.
#ifndef CONVEYOR_TRAINER_RANK_CONTEXT_H_
#define CONVEYOR_TRAINER_RANK_CONTEXT_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "model/masked_loss.h"
#include "model/parameter.h"
#include "parallel/communicator.h"
#include "parallel/parallel_state.h"
#include "parallel/pipeline/pipeline_place.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

class RankContext {
 public:
  // `state` must outlive the context; `config` (the same layout as `state`) gives the
  // schedule's stage layout, V, sequence parallelism and tied embeddings.
  static absl::StatusOr<RankContext> Create(ParallelState& state, const ResolvedConfig& config);
  // One process in the default place (P = V = 1, no sequence parallelism), owning its
  // groups of one: what one-rank tests train in.
  static RankContext SingleProcess();

  RankContext(RankContext&&);
  RankContext& operator=(RankContext&&);
  ~RankContext();

  Communicator& world() const { return *world_; }
  Communicator& tp() const { return *tp_; }
  Communicator& dp() const { return *dp_; }
  Communicator& pp() const { return *pp_; }
  Communicator& model_parallel() const { return *model_parallel_; }  // TP x PP
  // Context parallelism's ring (the ranks sharing each sample's tokens), and data x
  // context: the ranks holding the same parameters, over which gradients are reduced,
  // the distributed optimizer shards and checkpoints write each parameter once.
  Communicator& cp() const { return *cp_; }
  Communicator& dp_cp() const { return *dp_cp_; }
  // Expert parallelism: the ranks exchanging tokens for each other's experts (a group of
  // one when --expert-model-parallel-size is 1), the ranks holding the same experts, over
  // which expert gradients are reduced (dp_cp itself when EP = 1 and expert TP = TP), and
  // the ranks holding an expert's shards (--expert-tensor-parallel-size; tp itself by
  // default).
  Communicator& ep() const { return *ep_; }
  Communicator& expert_dp() const { return *expert_dp_; }
  Communicator& expert_tp() const { return *expert_tp_; }
  // The ranks holding the same copy of `p`: expert_dp for an expert-parallel parameter,
  // dp_cp for every other.
  Communicator& replicas(const Parameter& p) const {
    return p.expert_parallel ? expert_dp() : dp_cp();
  }
  // Sums the copies of a tied word embedding held by the first and the last pipeline
  // stage (loop layout, P > 1). A group of one elsewhere: an untied model, middle
  // stages, and the V-shape, whose rank 0 holds both copies (GptStage sums them).
  Communicator& tied_embedding() const { return *tied_embedding_; }

  int dp_rank() const { return dp_rank_; }
  int dp_size() const { return dp_size_; }
  int tp_rank() const { return tp_->rank(); }
  int tp_size() const { return tp_->size(); }
  bool sequence_parallel() const { return sequence_parallel_; }
  const pipeline::PipelinePlace& pipeline() const { return pipeline_; }

 private:
  // The groups of `state`, in the default pipeline place.
  explicit RankContext(ParallelState& state);

  std::unique_ptr<ParallelState> owned_state_;        // SingleProcess only
  std::unique_ptr<Communicator> no_embedding_peers_;  // tied_embedding() when a group of one
  Communicator* world_ = nullptr;
  Communicator* tp_ = nullptr;
  Communicator* dp_ = nullptr;
  Communicator* pp_ = nullptr;
  Communicator* cp_ = nullptr;
  Communicator* dp_cp_ = nullptr;
  Communicator* ep_ = nullptr;
  Communicator* expert_dp_ = nullptr;
  Communicator* expert_tp_ = nullptr;
  Communicator* model_parallel_ = nullptr;
  Communicator* tied_embedding_ = nullptr;
  int dp_rank_ = 0;
  int dp_size_ = 1;
  bool sequence_parallel_ = false;
  pipeline::PipelinePlace pipeline_;
};

// The loss of a step (or of several) as Megatron reports its lm loss: the masked loss
// sum over the global batch divided by its unmasked tokens (training.py sums both
// over micro-batches and data-parallel ranks; without a loss mask this is the mean of
// the micro-batches' means). Only the last stage computes losses, so the sum over the
// pipeline gives every rank the loss (and all of them agree on skipping a NaN step).
// A batch whose tokens are all masked reports 0 (MaskedLoss::Mean). Under context
// parallelism each CP rank holds its tokens' share, summed too. Every rank of the
// pipeline, context- and data-parallel groups must call.
absl::StatusOr<double> MeanLossOverRanks(const MaskedLoss& local, const RankContext& context);

// Multi-token prediction's losses of a step, one per depth: Megatron's "mtp_<k> loss", the
// mean over the step's `micro_batches` micro-batches and the data-parallel ranks of each
// micro-batch's mean loss at depth k, from this rank's GptStage::mtp_losses() (empty
// without the last stage; each context-parallel rank's share is summed). Empty when
// `depths` is 0. Every rank of the pipeline, context- and data-parallel groups must call.
absl::StatusOr<std::vector<double>> MtpLossesOverRanks(std::vector<double> local, int64_t depths,
                                                       int64_t micro_batches,
                                                       const RankContext& context);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_RANK_CONTEXT_H_
