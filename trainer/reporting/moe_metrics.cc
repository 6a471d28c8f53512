#include "trainer/reporting/moe_metrics.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/status_macros.h"

namespace conveyor {
namespace {

// Per global layer, one record of the summed metrics: [micro-batches, load balancing, z,
// dropped, tokens of expert 0 .. E-1].
constexpr int64_t kHead = 4;

}  // namespace

absl::StatusOr<std::optional<MoeStepFigures>> GatherMoeStepFigures(GptStage* stage,
                                                                   const MoeShape& moe,
                                                                   int64_t num_layers,
                                                                   const RankContext& context) {
  const int64_t experts = moe.experts();
  if (experts == 0) return std::optional<MoeStepFigures>();
  const int64_t width = kHead + experts;
  std::vector<double> records(num_layers * width, 0.0);
  for (int c = 0; c < stage->num_chunks(); ++c) {
    GptModel& chunk = stage->chunk(c);
    for (TransformerLayer* each : chunk.AllLayers()) {
      TransformerLayer& layer = *each;
      if (layer.moe() == nullptr) continue;
      const MoeLayerMetrics m = layer.moe()->TakeMetrics();
      double* record = records.data() + layer.layer_index() * width;
      record[0] = static_cast<double>(m.micro_batches);
      record[1] = m.load_balancing_loss;
      record[2] = m.z_loss;
      record[3] = static_cast<double>(m.dropped);
      for (size_t e = 0; e < m.tokens_per_expert.size(); ++e) {
        record[kHead + e] = static_cast<double>(m.tokens_per_expert[e]);
      }
    }
  }
  // Each layer lives on one pipeline stage; data-parallel ranks route their own tokens.
  // Context-parallel ranks hold parts of one micro-batch: their tokens and drops add up
  // to its; each reports the whole micro-batch's losses, and its micro-batches count as
  // often, so the averages are unchanged.
  const int n = static_cast<int>(records.size());
  RETURN_IF_ERROR(context.pp().AllReduceSum(records.data(), n));
  RETURN_IF_ERROR(context.dp_cp().AllReduceSum(records.data(), n));
  MoeStepFigures f;
  f.per_sequence = moe.balancing == MoeLoadBalancingType::kSeqAuxLoss;
  double records_counted = 0.0;
  f.min_tokens_per_expert = std::numeric_limits<int64_t>::max();
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (!moe.IsMoeLayer(layer)) continue;
    const double* record = records.data() + layer * width;
    records_counted += record[0];
    f.load_balancing_loss += record[1];
    f.z_loss += record[2];
    f.dropped_tokens += static_cast<int64_t>(record[3]);
    for (int64_t e = 0; e < experts; ++e) {
      const auto tokens = static_cast<int64_t>(record[kHead + e]);
      f.min_tokens_per_expert = std::min(f.min_tokens_per_expert, tokens);
      f.max_tokens_per_expert = std::max(f.max_tokens_per_expert, tokens);
    }
  }
  if (records_counted > 0) {
    f.load_balancing_loss /= records_counted;
    f.z_loss /= records_counted;
  }
  return std::optional<MoeStepFigures>(f);
}

}  // namespace conveyor
