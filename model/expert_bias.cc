#include "model/expert_bias.h"

#include <algorithm>
#include <utility>

namespace conveyor {

void UpdateExpertBias(absl::Span<const float> tokens, float rate, absl::Span<float> bias) {
  float total = 0.0f;
  for (float t : tokens) total += t;
  const float mean = total / static_cast<float>(tokens.size());
  for (size_t e = 0; e < bias.size(); ++e) {
    const float offset = mean - tokens[e];
    const float sign = offset > 0.0f ? 1.0f : (offset < 0.0f ? -1.0f : 0.0f);
    bias[e] += sign * rate;
  }
}

ExpertBias::ExpertBias(std::string name, int64_t experts)
    : name_(std::move(name)), values_(experts, 0.0f), step_tokens_(experts, 0.0f) {}

void ExpertBias::CountMicroBatch(absl::Span<const int32_t> experts_of_slot,
                                 absl::Span<const uint8_t> keep, int64_t padded_rows) {
  if (padded_rows > 0) {
    for (float& t : step_tokens_) t += static_cast<float>(padded_rows);
    return;
  }
  for (size_t slot = 0; slot < experts_of_slot.size(); ++slot) {
    if (keep.empty() || keep[slot] != 0) step_tokens_[experts_of_slot[slot]] += 1.0f;
  }
}

void ExpertBias::Update(absl::Span<const float> tokens, float rate) {
  UpdateExpertBias(tokens, rate, absl::MakeSpan(values_));
  ClearCounts();
}

void ExpertBias::ClearCounts() { std::fill(step_tokens_.begin(), step_tokens_.end(), 0.0f); }

}  // namespace conveyor
