// GPT: embedding -> transformer layers -> final norm -> output layer -> cross-entropy.
//
// A GptModel holds the part of the model one rank runs: a contiguous range of layers,
// plus the embedding on the first pipeline stage and the head (final norm, output
// layer, loss, and multi-token prediction's depths: model/mtp_block.h) on the last, each
// tensor-parallel over `tp`. The pieces are separate
// calls so that a pipeline stage can run them per micro-batch in any order a schedule
// asks; Forward/Backward run them all, as a rank without pipelining does.
//
// Vocabulary parallelism (Megatron's): the word embedding and the output layer hold
// vocabulary rows [rank * V/TP, (rank + 1) * V/TP); the embedding's partial lookups
// are summed over TP and the cross-entropy never gathers the logits.
#ifndef CONVEYOR_MODEL_GPT_MODEL_H_
#define CONVEYOR_MODEL_GPT_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/linear.h"
#include "model/masked_loss.h"
#include "model/micro_batch.h"
#include "model/model_shape.h"
#include "model/mtp_block.h"
#include "model/norm_layer.h"
#include "model/output_loss.h"
#include "model/parameter.h"
#include "model/recompute.h"
#include "model/tensor_parallel.h"
#include "model/transformer_layer.h"
#include "runtime/op_params.h"
#include "runtime/ops.h"

namespace conveyor {

// The word embedding's name; a tied model's head holds a copy under the same name.
inline constexpr char kWordEmbeddingName[] = "embedding.word_embeddings.weight";

// Which part of the model a rank holds.
struct ModelPartition {
  int64_t first_layer = 0;
  int64_t num_layers = -1;  // -1: all layers from first_layer
  bool has_embedding = true;
  bool has_head = true;
};

struct EmbeddingStash {
  std::vector<int32_t> tokens;
};

struct HeadStash {
  std::vector<float> loss_mask;  // empty: every token's loss counts
  int64_t loss_tokens = 0;       // tokens the mask keeps
  Tensor final_in;
  NormStats final_norm;
  OutputLossStash output;
  std::vector<MtpDepthStash> mtp;  // one per multi-token prediction depth
};

// The losses the head computes for one micro-batch.
struct HeadLoss {
  MaskedLoss lm;  // the model's next-token loss (Megatron's "lm loss")
  // Per multi-token prediction depth: this rank's masked sum over the depth's unmasked
  // tokens in the whole micro-batch, so that the context-parallel ranks' terms sum to the
  // depth's mean loss on the micro-batch (what Megatron logs as "mtp_<k> loss").
  std::vector<double> mtp;
};

// Everything one micro-batch's backward needs on this rank.
struct GptStash {
  EmbeddingStash embedding;
  std::vector<LayerStash> layers;  // indexed by local layer
  HeadStash head;
};

class GptModel {
 public:
  // `ops` computes the model (the caller's backend: the trainer's, or &CpuOps::Get());
  // `tp` holds the model's groups (model/model_groups.h; TensorParallel() on one rank).
  // Both must outlive the model.
  GptModel(const Ops* ops, const ModelShape& shape, uint64_t seed, const TensorParallel* tp,
           ModelPartition partition = {}, SelectiveRecompute selective = {});

  // Embedding output for this rank's rows (its sequence shard under SP).
  absl::StatusOr<Tensor> EmbeddingForward(const MicroBatchContext& mb, const int32_t* tokens,
                                          EmbeddingStash* stash) const;
  absl::Status EmbeddingBackward(const MicroBatchContext& mb, const Tensor& d_embedding,
                                 EmbeddingStash* stash);

  int64_t num_local_layers() const { return static_cast<int64_t>(layers_.size()); }
  TransformerLayer& layer(int64_t local_index) { return layers_[local_index]; }
  // The weight of the mixture-of-experts auxiliary losses in the gradient, per layer
  // (TransformerLayer::SetAuxLossScale).
  void SetAuxLossScale(float scale) {
    for (TransformerLayer& layer : layers_) layer.SetAuxLossScale(scale);
    if (mtp_ != nullptr) mtp_->SetAuxLossScale(scale);
  }
  // The multi-token prediction depths on the last stage, or null.
  MtpBlock* mtp() { return mtp_.get(); }
  // Every transformer layer of the partition: its own, then the multi-token prediction
  // depths' (whose layer_index() continues after the model's last layer).
  std::vector<TransformerLayer*> AllLayers();

  // The cross-entropy of the micro-batch's tokens that its loss mask keeps
  // (mb.documents' --eod-mask-loss mask; every token without one), and with multi-token
  // prediction each depth's (model/mtp_block.h), which reads the micro-batch's whole
  // [batch * seq] `tokens` (unread without it).
  absl::StatusOr<HeadLoss> HeadForward(const MicroBatchContext& mb, const Tensor& x,
                                       const int32_t* tokens, const int32_t* labels,
                                       HeadStash* stash) const;
  // Gradient of the loss weighted by `weighting` (with multi-token prediction, of the
  // loss plus lambda / D times the depths' losses, each weighted alike) with respect to
  // the head's input; accumulates the head's weight gradients.
  absl::StatusOr<Tensor> HeadBackward(const MicroBatchContext& mb, const LossWeighting& weighting,
                                      HeadStash* stash);

  // The whole partition for one micro-batch (first and last stage in one: no pipeline);
  // the loss is MaskedLoss::Mean(), plus lambda / D times the depths' mean losses with
  // multi-token prediction (the objective Backward differentiates; one context-parallel
  // rank).
  absl::StatusOr<float> Forward(const MicroBatchContext& mb, const int32_t* tokens,
                                const int32_t* labels, GptStash* stash);
  // Adds d(loss_scale * loss)/d(parameters) into the gradients and empties the stash.
  absl::Status Backward(const MicroBatchContext& mb, float loss_scale, GptStash* stash);

  ParameterStore& parameters() { return store_; }
  const Ops& ops() const { return *ops_; }
  const ModelShape& shape() const { return shape_; }
  const TensorParallel& tp() const { return *tp_; }

 private:
  CounterRng EmbeddingDropoutRng(int64_t iteration) const;
  // The embedding's dropout on this rank's rows, in place, each masked by its row in
  // the micro-batch.
  void EmbeddingDropout(const MicroBatchContext& mb, Tensor* x) const;
  // The micro-batch's tokens that count in its loss, over all its samples' positions.
  static int64_t UnmaskedTokens(const MicroBatchContext& mb);
  int64_t vocab_start() const { return tp_->rank() * local_vocab_; }

  const Ops* ops_;
  ModelShape shape_;
  uint64_t seed_;
  const TensorParallel* tp_;
  int64_t local_vocab_;
  ParameterStore store_;
  std::unique_ptr<RopeTable> rope_;          // null with learned positions
  Parameter* word_embedding_ = nullptr;      // first stage, or last stage when tied
  Parameter* position_embedding_ = nullptr;  // first stage with learned positions
  std::vector<TransformerLayer> layers_;
  std::unique_ptr<NormLayer> final_norm_;  // last stage
  Parameter* output_layer_ = nullptr;      // last stage, untied
  std::unique_ptr<OutputLoss> output_loss_;  // last stage
  std::unique_ptr<MtpBlock> mtp_;            // last stage, with multi-token prediction
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_GPT_MODEL_H_
