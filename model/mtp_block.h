// DeepSeek-V3's multi-token prediction (DeepSeek-AI, "DeepSeek-V3 Technical Report",
// 2024, §2.2), as Megatron builds it (megatron/core/transformer/multi_token_prediction.py):
// D sequential modules after the model's last layer, on the last pipeline stage. At
// position i, depth k = 1..D predicts token t_{i+k+1}:
//
//   e_i    = dropout(Emb(t_{i+k}))                   the model's word embedding
//   u_i    = M_k [enorm_k(e_i); hnorm_k(h_i^{k-1})]  M_k: [hidden, 2 hidden], no bias
//   h^k    = final_norm_k(TransformerLayer_k(u))      a layer like the model's last
//   loss_k = CE(W_out h_i^k, t_{i+k+1}), masked mean over i
//
// h^0 is the output of the model's final norm (Megatron's decoder applies it before the
// MTP block), W_out the model's output layer (or tied embedding), and the embedding's
// input and the labels are the micro-batch's rolled left by k within each sample
// (Megatron's roll_tensor): the last k positions of a sample have no target and do not
// count, nor do positions whose rolled loss mask is 0. The training loss is
// L + lambda / D * sum_k loss_k (lambda: --mtp-loss-scaling-factor).
//
// Module k's parameters are named like a layer after the model's last,
// "layers.<num_layers + k - 1>.*" (enorm, hnorm, eh_proj, final_norm beside the
// transformer layer's), as DeepSeek-V3's published checkpoint places them.
// Tensor parallelism (Megatron's): the embedding's partial lookups are summed over TP,
// M_k is column-parallel (its output rows split) and its output gathered whole.
#ifndef CONVEYOR_MODEL_MTP_BLOCK_H_
#define CONVEYOR_MODEL_MTP_BLOCK_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/layer_stash.h"
#include "model/linear.h"
#include "model/masked_loss.h"
#include "model/micro_batch.h"
#include "model/model_shape.h"
#include "model/norm_layer.h"
#include "model/output_loss.h"
#include "model/parameter.h"
#include "model/recompute.h"
#include "model/tensor_parallel.h"
#include "model/transformer_layer.h"
#include "runtime/ops.h"

namespace conveyor {

// What one depth's backward needs for one micro-batch.
struct MtpDepthStash {
  std::vector<int32_t> tokens;  // this rank's rows of the rolled tokens
  Tensor e, h_in, cat_full, layer_out;
  NormStats enorm, hnorm, final_norm;
  LayerStash layer;
  OutputLossStash output;
  int64_t loss_tokens = 0;  // the depth's unmasked tokens in the whole micro-batch
};

class MtpBlock {
 public:
  // `word_embedding` and `output` are the model's (this rank's vocabulary rows); they,
  // `ops`, `rope` (null: no RoPE) and `tp` must outlive the block.
  MtpBlock(const Ops* ops, ParameterStore* store, const ModelShape& shape, const RopeTable* rope,
           uint64_t seed, const TensorParallel* tp, SelectiveRecompute selective,
           Parameter* word_embedding, OutputLoss* output);

  // Each depth's masked cross-entropy (sum over this rank's tokens, and their count),
  // from h0 ([this rank's rows, hidden]) and the micro-batch's whole [batch * seq]
  // tokens and labels.
  absl::StatusOr<std::vector<MaskedLoss>> Forward(const MicroBatchContext& mb, const Tensor& h0,
                                                  const int32_t* tokens, const int32_t* labels,
                                                  std::vector<MtpDepthStash>* stash) const;
  // The gradient with respect to h0 of lambda / D * sum_k loss_k, each loss_k weighted as
  // `weighting` weighs the model's loss of `main_tokens` unmasked tokens; accumulates every
  // weight gradient (the shared embedding's and output layer's too) and empties the stash.
  absl::StatusOr<Tensor> Backward(const MicroBatchContext& mb, const LossWeighting& weighting,
                                  int64_t main_tokens, std::vector<MtpDepthStash>* stash);

  int64_t depths() const { return static_cast<int64_t>(depths_.size()); }
  TransformerLayer& layer(int64_t depth) { return depths_[depth].layer; }
  void SetAuxLossScale(float scale) {
    for (Depth& d : depths_) d.layer.SetAuxLossScale(scale);
  }

 private:
  struct Depth {
    Depth(const Ops* ops, ParameterStore* store, const ModelShape& shape, int64_t index,
          const RopeTable* rope, uint64_t seed, const TensorParallel* tp,
          SelectiveRecompute selective);
    NormLayer enorm, hnorm;
    Linear eh_proj;
    TransformerLayer layer;
    NormLayer final_norm;
  };
  CounterRng EmbeddingDropoutRng(int64_t depth, int64_t iteration) const;
  // u = M_k [enorm(e); hnorm(h)] for depth k (0-based `depth`), filling its stash.
  absl::StatusOr<Tensor> Combine(int64_t depth, MtpDepthStash* stash) const;
  // The gradients of e and h from u's; accumulates the norms' and M_k's.
  absl::Status CombineBackward(const Tensor& du, int64_t depth, MtpDepthStash* stash, Tensor* de,
                               Tensor* dh);
  // The embedding's lookup (summed over TP) and dropout, and its backward into the table.
  absl::StatusOr<Tensor> Embed(const MicroBatchContext& mb, int64_t depth,
                               const std::vector<int32_t>& tokens) const;
  absl::Status EmbedBackward(const MicroBatchContext& mb, int64_t depth, const Tensor& de,
                             const std::vector<int32_t>& tokens);

  const Ops* ops_;
  ModelShape shape_;
  uint64_t seed_;
  const TensorParallel* tp_;
  Parameter* word_embedding_;
  OutputLoss* output_;
  std::vector<Depth> depths_;
};

// The shape the depths' transformer layers are built from: Megatron builds them from the
// spec of the model's last layer, so each is a mixture of experts exactly when that is
// (layer num_layers + k - 1 is depth k's).
ModelShape MtpLayerShape(const ModelShape& s);

// A [batch * seq] array rolled left by k within each sample, the last k of each filled
// with `fill` (Megatron's roll_tensor).
template <typename T>
std::vector<T> RollSamples(const T* full, int64_t batch, int64_t seq, int64_t k, T fill) {
  std::vector<T> rolled(batch * seq, fill);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i + k < seq; ++i) rolled[b * seq + i] = full[b * seq + i + k];
  }
  return rolled;
}

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MTP_BLOCK_H_
