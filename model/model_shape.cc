#include "model/model_shape.h"

#include "model/moe_shape.h"
#include "proto/config_choices.h"

namespace conveyor {

ModelShape ModelShapeFromConfig(const Config& config, int64_t padded_vocab) {
  const ModelConfig& m = config.model();
  ModelShape s;
  s.num_layers = m.num_layers();
  s.hidden = m.hidden_size();
  s.ffn_hidden = m.ffn_hidden_size();
  s.heads = m.num_attention_heads();
  s.query_groups = m.num_query_groups();
  s.head_dim = m.kv_channels();
  s.seq = m.seq_length();
  s.padded_vocab = padded_vocab;
  s.max_positions = m.max_position_embeddings();
  const std::optional<PositionEmbeddingType> positions =
      ParseChoice<PositionEmbeddingType>(m.position_embedding_type());
  s.rope = positions == PositionEmbeddingType::kRope;
  s.no_positions = positions == PositionEmbeddingType::kNone;
  s.rotary_base = m.rotary_base();
  s.rotary_percent = m.rotary_percent();
  s.rms_norm = ParseChoice<Normalization>(m.normalization()) == Normalization::kRmsNorm;
  s.norm_epsilon = m.norm_epsilon();
  s.swiglu = m.swiglu();
  s.tied_embeddings = !m.untie_embeddings_and_output_weights();
  s.linear_bias = !m.disable_bias_linear();
  s.qkv_bias = m.add_qkv_bias();
  s.qk_layernorm = m.qk_layernorm();
  s.moe = MoeShapeFromConfig(m);
  s.init_std = m.init_method_std();
  s.hidden_dropout = m.hidden_dropout();
  s.attention_dropout = m.attention_dropout();
  return s;
}

int64_t PipelineMessageElements(int64_t tokens, int64_t hidden, int tp_size,
                                bool sequence_parallel) {
  return tokens / (sequence_parallel ? tp_size : 1) * hidden;
}

}  // namespace conveyor
