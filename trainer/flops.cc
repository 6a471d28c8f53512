#include "trainer/flops.h"

namespace conveyor {

double MegatronFlopsPerIteration(const ModelShape& s, int64_t global_batch_size) {
  const double h = static_cast<double>(s.hidden);
  const double attention =
      (1.0 + static_cast<double>(s.query_groups) / s.heads + static_cast<double>(s.seq) / h) *
      (static_cast<double>(s.heads * s.head_dim) / h);
  const double mlp = (static_cast<double>(s.ffn_hidden) / h) * (s.swiglu ? 1.5 : 1.0);
  const double logits = static_cast<double>(s.padded_vocab) / (2.0 * s.num_layers * h);
  return 12.0 * static_cast<double>(global_batch_size) * s.seq * s.num_layers * h * h *
         (attention + mlp + logits);
}

}  // namespace conveyor
