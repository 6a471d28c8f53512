// The model as a pipeline Stage: the V chunks one pipeline rank holds, each a
// GptModel over a contiguous range of layers (with the embedding on global stage 0
// and the head on the last global stage), and the per-(micro-batch, chunk) stashes
// the schedule keeps in flight between F, B and W.
#ifndef CONVEYOR_MODEL_GPT_STAGE_H_
#define CONVEYOR_MODEL_GPT_STAGE_H_

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gpt_model.h"
#include "model/masked_loss.h"
#include "model/micro_batch.h"
#include "parallel/pipeline/pipeline_place.h"
#include "parallel/pipeline/stage.h"

namespace conveyor {

// One micro-batch as the first and last stages need it.
struct MicroBatchInput {
  MicroBatchContext context;  // context.documents points into `documents`
  std::vector<int32_t> tokens;
  std::vector<int32_t> labels;
  // Held by pointer, so that context.documents stays valid as the input moves.
  std::shared_ptr<const DocumentMasks> documents;
};
using MicroBatchFeed = std::function<absl::StatusOr<MicroBatchInput>(int micro_batch)>;

class GptStage : public pipeline::Stage {
 public:
  // `ops` computes the stage (the parameters are placed on its device); `tp` holds the
  // model's groups (TensorParallel() on one rank); both must outlive the stage.
  // `layers_per_stage` has one entry per global stage (P * V).
  GptStage(const Ops* ops, const ModelShape& shape, uint64_t seed, const TensorParallel* tp,
           const pipeline::PipelinePlace& place, const std::vector<int64_t>& layers_per_stage,
           RecomputePolicy recompute = {});

  const Ops& ops() const { return chunks_.front()->ops(); }

  // Starts a step: where micro-batches come from (whole samples: each context-parallel
  // rank is given the same, and the stage marks its place in the group's ring on
  // them), their size in tokens (this rank's, one of the context-parallel group's ranks
  // that share each micro-batch's tokens), and the weight of each micro-batch's loss in
  // the gradient (1 / (M * DP) of its mean, or its sum over the global batch's unmasked
  // tokens under --calculate-per-token-loss).
  void BeginStep(MicroBatchFeed feed, int64_t tokens_per_micro_batch,
                 const LossWeighting& weighting);
  // Called with parameters whose gradients are complete for the step: each layer's
  // after its W for the last of the step's `micro_batches` micro-batches, and the
  // chunk's embedding and head with the chunk's last W. --overlap-grad-reduce starts
  // their data-parallel reduction from here while backward goes on.
  void OnGradientsReady(int micro_batches,
                        std::function<void(const std::vector<Parameter*>&)> callback) {
    micro_batches_per_step_ = micro_batches;
    gradients_ready_ = std::move(callback);
  }

  // Called before a forward reads parameters (the chunk's embedding and head first, then
  // each layer's): --overlap-param-gather waits there for their all-gather.
  void OnParametersNeeded(
      std::function<absl::Status(const std::vector<Parameter*>&)> callback) {
    parameters_needed_ = std::move(callback);
  }

  // The masked losses of the micro-batches this rank's last stage computed, summed.
  const MaskedLoss& loss() const { return loss_; }
  // With multi-token prediction, per depth: the sum over the step's micro-batches of this
  // rank's share of the depth's mean loss on each (HeadLoss::mtp); empty without it or on
  // a rank without the last stage.
  const std::vector<double>& mtp_losses() const { return mtp_losses_; }
  // Drops what forward passes kept (after an evaluation, which runs no backward).
  void DiscardStashes() {
    stashes_.clear();
    embedding_grads_.clear();
  }

  int64_t BoundaryElements() const override;
  // The compute dtype: activations and their gradients cross stages as the layers
  // hold them (bf16 under --bf16).
  DType BoundaryDType() const override { return ops().compute_dtype(); }
  Device device() const override { return ops().device(); }
  absl::StatusOr<Tensor> Forward(int micro_batch, int chunk, Tensor input) override;
  absl::StatusOr<Tensor> BackwardInput(int micro_batch, int chunk, Tensor output_grad) override;
  absl::Status BackwardWeight(int micro_batch, int chunk) override;
  absl::StatusOr<Tensor> Backward(int micro_batch, int chunk, Tensor output_grad) override;

  // The head's copy of the word embedding (tied, or read by the multi-token prediction
  // depths), when another chunk or rank holds the embedding: the gradient norm must not
  // count it twice.
  const Parameter* TiedCopyInHead() const;

  std::vector<Parameter*> parameters();
  const pipeline::PipelinePlace& place() const { return place_; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  GptModel& chunk(int c) { return *chunks_[c]; }
  bool has_embedding(int c) const { return GlobalStage(c) == 0; }
  bool has_head(int c) const { return GlobalStage(c) == num_stages_ - 1; }

 private:
  int GlobalStage(int chunk) const;
  // A received flat tensor (of BoundaryDType) as a [rows, hidden] activation.
  Tensor FromBoundary(const Tensor& received, int64_t rows) const;
  // What crosses to the neighbour stage: `t` in BoundaryDType (a gradient may come out
  // of the layers in fp32).
  Tensor ToBoundary(const Tensor& t) const { return ops().CastTo(t, BoundaryDType()); }
  // Full recomputation: reruns the forward of layer `index`'s group from its kept input
  // when B reaches a layer whose stash was dropped.
  absl::Status RebuildStash(const MicroBatchContext& mb, GptModel& model, int64_t index,
                            GptStash* stash);
  absl::StatusOr<const MicroBatchInput*> Input(int micro_batch);
  // B through the chunk's layers; with `fused`, each layer's W right after its B.
  absl::StatusOr<Tensor> BackwardThrough(int micro_batch, int chunk, Tensor output_grad,
                                         bool fused);

  ModelShape shape_;
  const TensorParallel* tp_;
  pipeline::PipelinePlace place_;
  RecomputePolicy recompute_;
  int num_stages_;
  std::vector<std::unique_ptr<GptModel>> chunks_;
  std::map<std::pair<int, int>, GptStash> stashes_;        // (micro-batch, chunk)
  std::map<int, MicroBatchInput> inputs_;                  // fetched once per micro-batch
  std::map<std::pair<int, int>, Tensor> embedding_grads_;  // B's output for W
  MicroBatchFeed feed_;
  int64_t boundary_elements_ = 0;
  // Whether this W pass of `chunk` is its last of the step.
  bool LastWeightPass(int chunk) const;
  // A layer's W is done (calls gradients_ready_ on the last pass).
  void LayerWeightDone(int chunk, int64_t layer);

  int micro_batches_per_step_ = 0;
  std::function<void(const std::vector<Parameter*>&)> gradients_ready_;
  std::function<absl::Status(const std::vector<Parameter*>&)> parameters_needed_;
  std::map<int, int> weight_passes_;                     // per chunk: completed W passes this step
  std::vector<std::vector<Parameter*>> outside_layers_;  // per chunk: embedding, head
  LossWeighting weighting_;
  MaskedLoss loss_;
  std::vector<double> mtp_losses_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_GPT_STAGE_H_
