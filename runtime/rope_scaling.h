// The frequencies of rotary position embedding and their long-context scalings, as
// Megatron's RotaryEmbedding and YarnRotaryEmbedding compute them (fp32):
//   unscaled: f_i = 1 / base^(2i / d), i < d / 2 (d the rotated dimensions)
//   Llama 3.1 (Meta's Llama 3.1 release; transformers' _compute_llama3_parameters), with
//     wavelength w_i = 2 pi / f_i, L = original max positions, lo/hi the frequency factors:
//     f_i / factor if w_i > L / lo;  f_i if w_i < L / hi;
//     else (1 - a) f_i / factor + a f_i,  a = (L / w_i - lo) / (hi - lo)
//   YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language
//     Models"), scale s: f_i = f_i / s (1 - e_i) + f_i e_i, where the extrapolation weight
//     e_i = 1 - clamp((i - low) / (high - low), 0, 1) and [low, high] is the range of
//     dimensions between beta_fast and beta_slow rotations over L positions,
//       dim(r) = d ln(L / (2 pi r)) / (2 ln base),  low = floor(dim(beta_fast)),
//       high = ceil(dim(beta_slow)) (unrounded without round_to_int), clamped to [0, d - 1];
//     cos and sin are multiplied by the concentration factor
//       m(s, mscale) / m(s, mscale_all_dim),  m(s, x) = 0.1 x ln s + 1 (1 for s <= 1),
//     which scales every attention logit by its square.
#ifndef CONVEYOR_RUNTIME_ROPE_SCALING_H_
#define CONVEYOR_RUNTIME_ROPE_SCALING_H_

#include <cstdint>
#include <vector>

namespace conveyor {

enum class RopeScalingKind { kNone, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::kNone;
  double factor = 1.0;  // Llama 3.1's factor or YaRN's s
  int64_t original_max_positions = 8192;
  // Llama 3.1
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // YaRN
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  bool round_to_int = true;
};

// f_i for i < dims / 2.
std::vector<float> RopeFrequencies(int64_t dims, float base, const RopeScaling& scaling);

// The factor cos and sin are multiplied by: YaRN's concentration factor, else 1.
float RopeConcentration(const RopeScaling& scaling);

// YaRN's m(s, x) = 0.1 x ln s + 1 (1 for s <= 1). DeepSeek's multi-latent attention also
// multiplies its softmax scale by m(s, mscale_all_dim)^2.
double YarnMscale(double scale, double mscale);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_ROPE_SCALING_H_
