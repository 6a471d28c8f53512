#include "trainer/reporting/moe_metrics.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/status_macros.h"

namespace conveyor {
namespace {

// The router's losses as Megatron names and orders them.
struct LossField {
  const char* name;
  double RouterLosses::*value;
};
constexpr LossField kLosses[] = {
    {"load_balancing_loss", &RouterLosses::load_balancing},
    {"seq_load_balancing_loss", &RouterLosses::seq_load_balancing},
    {"global_load_balancing_loss", &RouterLosses::global_load_balancing},
    {"z_loss", &RouterLosses::z}};
constexpr int kLossCount = 4;

// Per global layer, one record of the summed metrics: [micro-batches, the kLosses,
// dropped, tokens of expert 0 .. E-1].
constexpr int64_t kDropped = 1 + kLossCount;
constexpr int64_t kHead = kDropped + 1;

// Whether the log shows kLosses[i]: a load-balancing loss when its type is listed
// (Megatron's track_names), the z-loss always.
bool Logged(int i, absl::Span<const MoeLoadBalancingType> types) {
  constexpr MoeLoadBalancingType kType[] = {MoeLoadBalancingType::kAuxLoss,
                                            MoeLoadBalancingType::kSeqAuxLoss,
                                            MoeLoadBalancingType::kGlobalAuxLoss};
  return i == kLossCount - 1 || std::find(types.begin(), types.end(), kType[i]) != types.end();
}

}  // namespace

absl::StatusOr<std::optional<MoeStepFigures>> GatherMoeStepFigures(
    GptStage* stage, const MoeShape& moe, absl::Span<const MoeLoadBalancingType> types,
    int64_t num_layers, const RankContext& context) {
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
      for (int i = 0; i < kLossCount; ++i) record[1 + i] = m.losses.*kLosses[i].value;
      record[kDropped] = static_cast<double>(m.dropped);
      for (size_t e = 0; e < m.tokens_per_expert.size(); ++e) {
        record[kHead + e] = static_cast<double>(m.tokens_per_expert[e]);
      }
    }
  }
  // Each layer lives on one pipeline stage; data-parallel ranks route their own tokens.
  // Context-parallel ranks hold parts of one micro-batch: their tokens and drops add up
  // to its; each reports the whole micro-batch's losses, and its micro-batches count as
  // often, so the averages are unchanged. Every data-parallel rank reports the global
  // loss of its place's micro-batches (model/moe_global_load.h), which the average keeps,
  // as Megatron's sum over the ranks' parts does.
  const int n = static_cast<int>(records.size());
  RETURN_IF_ERROR(context.pp().AllReduceSum(records.data(), n));
  RETURN_IF_ERROR(context.dp_cp().AllReduceSum(records.data(), n));
  MoeStepFigures f;
  double records_counted = 0.0;
  std::vector<double> sums(kLossCount, 0.0);
  f.min_tokens_per_expert = std::numeric_limits<int64_t>::max();
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (!moe.IsMoeLayer(layer)) continue;
    const double* record = records.data() + layer * width;
    records_counted += record[0];
    for (int i = 0; i < kLossCount; ++i) sums[i] += record[1 + i];
    f.dropped_tokens += static_cast<int64_t>(record[kDropped]);
    for (int64_t e = 0; e < experts; ++e) {
      const auto tokens = static_cast<int64_t>(record[kHead + e]);
      f.min_tokens_per_expert = std::min(f.min_tokens_per_expert, tokens);
      f.max_tokens_per_expert = std::max(f.max_tokens_per_expert, tokens);
    }
  }
  for (int i = 0; i < kLossCount; ++i) {
    if (!Logged(i, types)) continue;
    f.losses.emplace_back(kLosses[i].name, records_counted > 0 ? sums[i] / records_counted : 0.0);
  }
  return std::optional<MoeStepFigures>(f);
}

}  // namespace conveyor
