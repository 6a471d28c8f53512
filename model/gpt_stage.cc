#include "model/gpt_stage.h"

#include <algorithm>
#include <numeric>

#include "base/status_macros.h"
#include "model/parameter_placement.h"

namespace conveyor {

GptStage::GptStage(const Ops* ops, const ModelShape& shape, uint64_t seed, const TensorParallel* tp,
                   const pipeline::PipelinePlace& place,
                   const std::vector<int64_t>& layers_per_stage, RecomputePolicy recompute)
    : shape_(shape),
      tp_(tp),
      place_(place),
      recompute_(recompute),
      num_stages_(place.num_stages()) {
  for (int c = 0; c < place.num_chunks; ++c) {
    const int stage = GlobalStage(c);
    ModelPartition partition;
    partition.first_layer =
        std::accumulate(layers_per_stage.begin(), layers_per_stage.begin() + stage, int64_t{0});
    partition.num_layers = layers_per_stage[stage];
    partition.has_embedding = stage == 0;
    partition.has_head = stage == num_stages_ - 1;
    chunks_.push_back(
        std::make_unique<GptModel>(ops, shape, seed, tp_, partition, recompute.selective));
    // The chunk's parameters that no transformer layer owns (embedding, head).
    std::vector<Parameter*> in_layers;
    for (int64_t i = 0; i < chunks_.back()->num_local_layers(); ++i) {
      for (Parameter* p : chunks_.back()->layer(i).Parameters()) in_layers.push_back(p);
    }
    outside_layers_.emplace_back();
    for (Parameter* p : chunks_.back()->parameters().parameters()) {
      if (std::find(in_layers.begin(), in_layers.end(), p) == in_layers.end()) {
        outside_layers_.back().push_back(p);
      }
    }
  }
  PlaceParameters(this->ops(), parameters());
}

int GptStage::GlobalStage(int chunk) const { return place_.GlobalStage(chunk); }

void GptStage::BeginStep(MicroBatchFeed feed, int64_t tokens_per_micro_batch,
                         const LossWeighting& weighting) {
  feed_ = std::move(feed);
  boundary_elements_ = PipelineMessageElements(tokens_per_micro_batch, shape_.hidden, tp_->size(),
                                               tp_->sequence_parallel());
  weighting_ = weighting;
  // Megatron scales the auxiliary losses' gradients to 1 / (M * DP) either way: under
  // --calculate-per-token-loss by the micro-batch's tokens over the global batch's (all
  // its tokens: each context-parallel rank's router applies it to its rows of the
  // gradient of the whole micro-batch's losses).
  const int64_t micro_batch_tokens = tokens_per_micro_batch * tp_->groups().cp->size();
  const float aux_loss_scale = weighting.per_token
                                   ? weighting.scale * static_cast<float>(micro_batch_tokens)
                                   : weighting.scale;
  for (auto& chunk : chunks_) chunk->SetAuxLossScale(aux_loss_scale);
  loss_ = MaskedLoss();
  mtp_losses_.clear();
  inputs_.clear();
  weight_passes_.clear();
}

int64_t GptStage::BoundaryElements() const { return boundary_elements_; }

absl::StatusOr<const MicroBatchInput*> GptStage::Input(int micro_batch) {
  auto it = inputs_.find(micro_batch);
  if (it == inputs_.end()) {
    ASSIGN_OR_RETURN(MicroBatchInput input, feed_(micro_batch));
    input.context.cp_size = tp_->groups().cp->size();
    input.context.cp_rank = tp_->groups().cp->rank();
    it = inputs_.emplace(micro_batch, std::move(input)).first;
  }
  return &it->second;
}

absl::StatusOr<Tensor> GptStage::Forward(int micro_batch, int chunk, Tensor input) {
  ASSIGN_OR_RETURN(const MicroBatchInput* in, Input(micro_batch));
  const MicroBatchContext& mb = in->context;
  GptModel& model = *chunks_[chunk];
  GptStash& stash = stashes_[{micro_batch, chunk}];
  const int64_t rows = BoundaryElements() / shape_.hidden;
  if (parameters_needed_) RETURN_IF_ERROR(parameters_needed_(outside_layers_[chunk]));
  Tensor x;
  if (has_embedding(chunk)) {
    ASSIGN_OR_RETURN(x, model.EmbeddingForward(mb, in->tokens.data(), &stash.embedding));
  } else {
    // A received activation is flat; give it its [rows, hidden] shape back.
    x = FromBoundary(input, rows);
  }
  stash.layers.resize(model.num_local_layers());
  for (int64_t i = 0; i < model.num_local_layers(); ++i) {
    Tensor layer_input = x;
    if (parameters_needed_) RETURN_IF_ERROR(parameters_needed_(model.layer(i).Parameters()));
    ASSIGN_OR_RETURN(x, model.layer(i).Forward(layer_input, mb, &stash.layers[i]));
    if (recompute_.Recomputes(i)) {
      // Keep the group's input only; BackwardInput reruns the forward.
      stash.layers[i] = LayerStash();
      if (recompute_.KeepsCheckpoint(i)) stash.layers[i].x = layer_input;
    }
  }
  if (!has_head(chunk)) return ToBoundary(x);
  ASSIGN_OR_RETURN(const HeadLoss loss,
                   model.HeadForward(mb, x, in->tokens.data(), in->labels.data(), &stash.head));
  loss_ += loss.lm;
  mtp_losses_.resize(loss.mtp.size());
  for (size_t k = 0; k < loss.mtp.size(); ++k) mtp_losses_[k] += loss.mtp[k];
  return Tensor();
}

absl::StatusOr<Tensor> GptStage::BackwardInput(int micro_batch, int chunk, Tensor output_grad) {
  return BackwardThrough(micro_batch, chunk, std::move(output_grad), /*fused=*/false);
}

absl::StatusOr<Tensor> GptStage::Backward(int micro_batch, int chunk, Tensor output_grad) {
  ASSIGN_OR_RETURN(Tensor grad,
                   BackwardThrough(micro_batch, chunk, std::move(output_grad), /*fused=*/true));
  RETURN_IF_ERROR(BackwardWeight(micro_batch, chunk));  // the embedding's, if any
  return grad;
}

absl::StatusOr<Tensor> GptStage::BackwardThrough(int micro_batch, int chunk, Tensor output_grad,
                                                 bool fused) {
  ASSIGN_OR_RETURN(const MicroBatchInput* in, Input(micro_batch));
  const MicroBatchContext& mb = in->context;
  GptModel& model = *chunks_[chunk];
  GptStash& stash = stashes_[{micro_batch, chunk}];
  Tensor dx;
  if (has_head(chunk)) {
    ASSIGN_OR_RETURN(dx, model.HeadBackward(mb, weighting_, &stash.head));
  } else {
    dx = FromBoundary(output_grad, BoundaryElements() / shape_.hidden);
  }
  for (int64_t i = model.num_local_layers(); i-- > 0;) {
    if (recompute_.Recomputes(i) && stash.layers[i].x1.empty()) {
      RETURN_IF_ERROR(RebuildStash(mb, model, i, &stash));
    }
    ASSIGN_OR_RETURN(dx, model.layer(i).BackwardInput(dx, mb, &stash.layers[i]));
    if (fused) {
      model.layer(i).BackwardWeight(&stash.layers[i]);
      LayerWeightDone(chunk, i);
    }
  }
  if (has_embedding(chunk)) {
    // The embedding has weights only: its backward waits for W.
    embedding_grads_[{micro_batch, chunk}] = std::move(dx);
    return Tensor();
  }
  return ToBoundary(dx);
}

Tensor GptStage::FromBoundary(const Tensor& received, int64_t rows) const {
  Tensor t = ops().NewActivation({rows, shape_.hidden});
  ops().Cast(received, &t);
  return t;
}

absl::Status GptStage::RebuildStash(const MicroBatchContext& mb, GptModel& model, int64_t index,
                                    GptStash* stash) {
  const int64_t start = recompute_.GroupStart(index);
  Tensor x = stash->layers[start].x;
  for (int64_t i = start; i <= index; ++i) {
    ASSIGN_OR_RETURN(x, model.layer(i).Forward(x, mb, &stash->layers[i]));
  }
  return absl::OkStatus();
}

absl::Status GptStage::BackwardWeight(int micro_batch, int chunk) {
  const std::pair<int, int> key{micro_batch, chunk};
  ASSIGN_OR_RETURN(const MicroBatchInput* in, Input(micro_batch));
  GptModel& model = *chunks_[chunk];
  GptStash& stash = stashes_[key];
  for (int64_t i = 0; i < model.num_local_layers(); ++i) {
    // After a fused backward the layers are done already (their stashes are empty).
    if (stash.layers[i].x.empty()) continue;
    model.layer(i).BackwardWeight(&stash.layers[i]);
    LayerWeightDone(chunk, i);
  }
  if (has_embedding(chunk)) {
    RETURN_IF_ERROR(model.EmbeddingBackward(in->context, embedding_grads_[key], &stash.embedding));
    embedding_grads_.erase(key);
  }
  stashes_.erase(key);
  if (gradients_ready_ && LastWeightPass(chunk)) gradients_ready_(outside_layers_[chunk]);
  ++weight_passes_[chunk];
  return absl::OkStatus();
}

bool GptStage::LastWeightPass(int chunk) const {
  auto it = weight_passes_.find(chunk);
  return (it == weight_passes_.end() ? 0 : it->second) + 1 == micro_batches_per_step_;
}

void GptStage::LayerWeightDone(int chunk, int64_t layer) {
  if (gradients_ready_ && LastWeightPass(chunk)) {
    gradients_ready_(chunks_[chunk]->layer(layer).Parameters());
  }
}

const Parameter* GptStage::TiedCopyInHead() const {
  // The last stage holds a copy when tied or, for the MTP depths, with multi-token
  // prediction.
  if (!(shape_.tied_embeddings || shape_.mtp_layers > 0) || num_stages_ == 1) return nullptr;
  for (int c = 0; c < num_chunks(); ++c) {
    if (has_head(c)) return chunks_[c]->parameters().Find(kWordEmbeddingName);
  }
  return nullptr;
}

std::vector<Parameter*> GptStage::parameters() {
  std::vector<Parameter*> all;
  for (auto& chunk : chunks_) {
    for (Parameter* p : chunk->parameters().parameters()) all.push_back(p);
  }
  return all;
}

}  // namespace conveyor
