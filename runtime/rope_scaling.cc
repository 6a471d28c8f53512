#include "runtime/rope_scaling.h"

#include <algorithm>
#include <cmath>

namespace conveyor {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Llama 3.1's rescaling of one frequency (fp32, the order of Megatron's _apply_scaling).
float Llama3Frequency(float f, const RopeScaling& s) {
  const float factor = static_cast<float>(s.factor);
  const float lo = static_cast<float>(s.low_freq_factor);
  const float hi = static_cast<float>(s.high_freq_factor);
  const float context = static_cast<float>(s.original_max_positions);
  const float wavelength = static_cast<float>(2.0 * kPi) / f;
  if (wavelength > context / lo) return f / factor;
  if (wavelength < context / hi) return f;
  const float a = (context / wavelength - lo) / (hi - lo);
  return (1.0f - a) * f / factor + a * f;
}

// The dimension index whose pair turns `rotations` times over the original context.
double YarnCorrectionDim(double rotations, int64_t dims, double base, int64_t context) {
  return static_cast<double>(dims) *
         std::log(static_cast<double>(context) / (rotations * 2 * kPi)) / (2 * std::log(base));
}

// YaRN's blend of f (extrapolated) and f / s (interpolated) for every pair.
void ApplyYarn(int64_t dims, float base, const RopeScaling& s, std::vector<float>* f) {
  double low = YarnCorrectionDim(s.beta_fast, dims, base, s.original_max_positions);
  double high = YarnCorrectionDim(s.beta_slow, dims, base, s.original_max_positions);
  if (s.round_to_int) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dims - 1));
  if (low == high) high += 0.001;  // no singular ramp
  const float factor = static_cast<float>(s.factor);
  for (size_t i = 0; i < f->size(); ++i) {
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    const float extrapolate = 1.0f - ramp;
    const float period = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dims));
    const float extra = 1.0f / period, inter = 1.0f / (factor * period);
    (*f)[i] = inter * (1.0f - extrapolate) + extra * extrapolate;
  }
}

}  // namespace

std::vector<float> RopeFrequencies(int64_t dims, float base, const RopeScaling& scaling) {
  std::vector<float> f(dims / 2);
  for (int64_t i = 0; i < dims / 2; ++i) {
    f[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dims));
  }
  if (scaling.kind == RopeScalingKind::kLlama3) {
    for (float& x : f) x = Llama3Frequency(x, scaling);
  } else if (scaling.kind == RopeScalingKind::kYarn) {
    ApplyYarn(dims, base, scaling, &f);
  }
  return f;
}

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

float RopeConcentration(const RopeScaling& scaling) {
  if (scaling.kind != RopeScalingKind::kYarn) return 1.0f;
  return static_cast<float>(YarnMscale(scaling.factor, scaling.mscale) /
                            YarnMscale(scaling.factor, scaling.mscale_all_dim));
}

}  // namespace conveyor
