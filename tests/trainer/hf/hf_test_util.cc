#include "tests/trainer/hf/hf_test_util.h"

#include <algorithm>

namespace conveyor {
namespace testing_util {

Config SmallGpt2Config() {
  Config config;
  ModelConfig* m = config.mutable_model();
  m->set_num_layers(2);
  m->set_hidden_size(8);
  m->set_num_attention_heads(2);
  m->set_seq_length(16);
  m->set_max_position_embeddings(16);
  m->set_vocab_size(50);
  m->set_make_vocab_size_divisible_by(16);
  config.mutable_parallel()->set_tensor_model_parallel_size(2);
  return config;
}

GlobalTensorMap PatternParameters(const Gpt2Dims& dims) {
  GlobalTensorMap tensors;
  int tensor_index = 0;
  for (const auto& [name, shape] : GptParameterShapes(dims)) {
    ++tensor_index;
    std::vector<float>& data = tensors[name];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.resize(n);
    // Exact in fp32 and different across tensors and elements.
    for (int64_t i = 0; i < n; ++i) data[i] = float(tensor_index * 100000 + i + 1);
  }
  return tensors;
}

GlobalTensorMap WithZeroPadding(GlobalTensorMap tensors, const Gpt2Dims& dims) {
  std::vector<float>& wte = tensors.at("embedding.word_embeddings.weight");
  std::fill(wte.begin() + dims.vocab * dims.hidden, wte.end(), 0.0f);
  return tensors;
}

}  // namespace testing_util
}  // namespace conveyor
