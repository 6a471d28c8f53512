#include "model/moe_global_load.h"

#include <iterator>
#include <vector>

#include "base/status_macros.h"

namespace conveyor {

absl::StatusOr<double> MoeGlobalLoad::Loss(const RouterSpec& spec, const MicroBatchContext& mb,
                                           absl::Span<const float> logits, float coeff,
                                           absl::Span<float> d_logits) {
  const int64_t e = spec.experts;
  if (mb.iteration != iteration_) {  // Megatron resets the counts once a step's are final
    summed_.clear();
    iteration_ = mb.iteration;
  }
  auto here = summed_.find(mb.first_sample);
  if (here == summed_.end()) {
    const ExpertLoad local = MeasureExpertLoad(spec, logits);
    std::vector<double> both(local.counts);
    both.insert(both.end(), local.scores.begin(), local.scores.end());
    RETURN_IF_ERROR(dp_->AllReduceSum(both.data(), 2 * e));
    ExpertLoad sum{std::vector<double>(both.begin(), both.begin() + e),
                   std::vector<double>(both.begin() + e, both.end())};
    here = summed_.emplace(mb.first_sample, std::move(sum)).first;
  }
  // Megatron's ga_steps: the step's micro-batches up to this one (in the order every
  // rank forwards them).
  std::vector<double> mean_counts(e, 0.0);
  int64_t steps = 0;
  for (auto it = summed_.begin(); it != std::next(here); ++it, ++steps) {
    for (int64_t i = 0; i < e; ++i) mean_counts[i] += it->second.counts[i];
  }
  const double tokens = static_cast<double>(logits.size() / e) * dp_->size();
  const double factor = static_cast<double>(e) / (static_cast<double>(spec.topk) * tokens * tokens);
  std::vector<double> weight(e);
  double loss = 0.0;  // of the data-parallel ranks' micro-batches together
  for (int64_t i = 0; i < e; ++i) {
    weight[i] = factor * mean_counts[i] / static_cast<double>(steps);
    loss += weight[i] * here->second.scores[i];
  }
  if (!d_logits.empty()) AddExpertScoresBackward(spec, logits, weight, coeff, d_logits);
  return loss;
}

}  // namespace conveyor
