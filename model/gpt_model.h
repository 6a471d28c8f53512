// GPT: embedding -> transformer layers -> final norm -> output layer -> cross-entropy.
//
// The pieces are separate calls (embedding, each layer's F/B/W, the head) so that a
// pipeline stage can run any contiguous part; Forward/Backward below run them all, in
// the order a single rank without pipelining uses.
#ifndef CONVEYOR_MODEL_GPT_MODEL_H_
#define CONVEYOR_MODEL_GPT_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "model/linear.h"
#include "model/micro_batch.h"
#include "model/model_shape.h"
#include "model/norm_layer.h"
#include "model/parameter.h"
#include "model/transformer_layer.h"
#include "runtime/cpu/rope.h"

namespace conveyor {

// Everything one micro-batch's backward needs, from embedding to loss.
struct GptStash {
  std::vector<int32_t> tokens;
  std::vector<int32_t> labels;
  std::vector<LayerStash> layers;
  Tensor final_in, final_out, logits, logsumexp;  // logits become their gradient
  NormStats final_norm;
};

class GptModel {
 public:
  GptModel(const ModelShape& shape, uint64_t seed);

  // Mean cross-entropy over the micro-batch's tokens; tokens and labels hold
  // mb.tokens() ids each. The stash keeps what Backward needs.
  float Forward(const MicroBatchContext& mb, const int32_t* tokens, const int32_t* labels,
                GptStash* stash);

  // Adds d(loss_scale * loss)/d(parameters) into the gradients and empties the stash.
  void Backward(const MicroBatchContext& mb, float loss_scale, GptStash* stash);

  ParameterStore& parameters() { return store_; }
  const ModelShape& shape() const { return shape_; }

 private:
  Tensor Embed(const MicroBatchContext& mb, const int32_t* tokens) const;
  void EmbeddingBackwardWeight(const MicroBatchContext& mb, const int32_t* tokens,
                               Tensor* d_embedding);
  CounterRng EmbeddingDropoutRng(int64_t iteration) const;

  ModelShape shape_;
  uint64_t seed_;
  ParameterStore store_;
  std::unique_ptr<cpu::RopeTable> rope_;  // null with learned positions
  Parameter* word_embedding_;
  Parameter* position_embedding_;  // null with RoPE
  std::vector<TransformerLayer> layers_;
  NormLayer final_norm_;
  std::unique_ptr<Linear> output_layer_;  // null with tied embeddings
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_GPT_MODEL_H_
