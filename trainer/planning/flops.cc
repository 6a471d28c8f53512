#include "trainer/planning/flops.h"

#include "model/mtp_block.h"

namespace conveyor {

namespace {

// Multi-latent attention's multiply-adds per token and layer, Megatron's MLA branch of the
// same function: the query path (W_q, or W_dq, W_uq and the latent's norm), the key/value
// path (W_dkv with its rotated key part, W_ukv, the latent's norm), W_o, and the core
// attention, which that branch counts causal-halved.
double MlaMultiplyAdds(const ModelShape& s) {
  const MlaShape& m = s.mla;
  const double h = static_cast<double>(s.hidden), a = static_cast<double>(s.heads);
  const double q_head = static_cast<double>(m.q_head_dim());
  const double query = m.q_lora_rank == 0
                           ? h * a * q_head
                           : static_cast<double>(m.q_lora_rank) * (h + a * q_head + 1.0);
  const double key_value = static_cast<double>(m.kv_lora_rank) *
                               (h + a * static_cast<double>(m.qk_head_dim + m.v_head_dim) + 1.0) +
                           h * static_cast<double>(m.qk_pos_emb_head_dim);
  const double output = a * static_cast<double>(m.v_head_dim) * h;
  const double core = static_cast<double>(s.seq) * a * (q_head + m.v_head_dim) / 2.0;
  return query + key_value + output + core;
}

}  // namespace

double MegatronFlopsPerIteration(const ModelShape& s, int64_t global_batch_size) {
  const double h = static_cast<double>(s.hidden);
  // Under MLA, 6 FLOPs per multiply-add (forward and backward) in units of 12 h^2.
  const double attention =
      s.mla.enabled
          ? MlaMultiplyAdds(s) / (2.0 * h * h)
          : (1.0 + static_cast<double>(s.query_groups) / s.heads + static_cast<double>(s.seq) / h) *
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
    ffn_sum +=
        layers.moe.IsMoeLayer(layer)
            ? static_cast<double>(s.moe.router.topk * s.moe.ffn_hidden + s.moe.shared_expert_ffn)
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
