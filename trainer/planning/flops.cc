#include "trainer/planning/flops.h"

namespace conveyor {

double MegatronFlopsPerIteration(const ModelShape& s, int64_t global_batch_size) {
  const double h = static_cast<double>(s.hidden);
  const double attention =
      (1.0 + static_cast<double>(s.query_groups) / s.heads + static_cast<double>(s.seq) / h) *
      (static_cast<double>(s.heads * s.head_dim) / h);
  // The MLP width summed over layers: dense layers' f, MoE layers' active experts'.
  double ffn_sum = 0.0;
  for (int64_t layer = 0; layer < s.num_layers; ++layer) {
    ffn_sum += s.moe.IsMoeLayer(layer)
                   ? static_cast<double>(s.moe.router.topk * s.moe.ffn_hidden +
                                         s.moe.shared_expert_ffn)
                   : static_cast<double>(s.ffn_hidden);
  }
  const double mlp = ffn_sum / (static_cast<double>(s.num_layers) * h) * (s.swiglu ? 1.5 : 1.0);
  const double logits = static_cast<double>(s.padded_vocab) / (2.0 * s.num_layers * h);
  return 12.0 * static_cast<double>(global_batch_size) * s.seq * s.num_layers * h * h *
         (attention + mlp + logits);
}

}  // namespace conveyor
