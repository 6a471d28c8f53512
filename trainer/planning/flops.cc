#include "trainer/planning/flops.h"

#include "model/mtp_block.h"

namespace conveyor {

double MegatronFlopsPerIteration(const ModelShape& s, int64_t global_batch_size) {
  const double h = static_cast<double>(s.hidden);
  const double attention =
      (1.0 + static_cast<double>(s.query_groups) / s.heads + static_cast<double>(s.seq) / h) *
      (static_cast<double>(s.heads * s.head_dim) / h);
  // Megatron counts the multi-token prediction depths' layers as layers (MoE when the
  // last is), their norms and projections (3h + 2h^2 per token and depth) and one more
  // output layer each.
  const ModelShape layers = MtpLayerShape(s);
  const int64_t num_layers = s.num_layers + s.mtp_layers;
  const double depths = static_cast<double>(s.mtp_layers);
  // The MLP width summed over layers: dense layers' f, MoE layers' active experts'.
  double ffn_sum = 0.0;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    ffn_sum += layers.moe.IsMoeLayer(layer)
                   ? static_cast<double>(s.moe.router.topk * s.moe.ffn_hidden +
                                         s.moe.shared_expert_ffn)
                   : static_cast<double>(s.ffn_hidden);
  }
  const double mlp = ffn_sum / (static_cast<double>(num_layers) * h) * (s.swiglu ? 1.5 : 1.0);
  const double logits =
      static_cast<double>(s.padded_vocab) * (1.0 + depths) / (2.0 * num_layers * h);
  const double mtp = depths * (3.0 * h + 2.0 * h * h) / (2.0 * num_layers * h * h);
  return 12.0 * static_cast<double>(global_batch_size) * s.seq * num_layers * h * h *
         (attention + mlp + logits + mtp);
}

}  // namespace conveyor
