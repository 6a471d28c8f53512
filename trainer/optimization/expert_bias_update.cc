#include "trainer/optimization/expert_bias_update.h"

#include "base/status_macros.h"

namespace conveyor {

std::vector<ExpertBias*> StageExpertBiases(GptStage* stage) {
  std::vector<ExpertBias*> out;
  for (int c = 0; c < stage->num_chunks(); ++c) {
    GptModel& chunk = stage->chunk(c);
    for (TransformerLayer* layer : chunk.AllLayers()) {  // the MTP depths' too
      MoeLayer* moe = layer->moe();
      if (moe != nullptr && moe->expert_bias() != nullptr) out.push_back(moe->expert_bias());
    }
  }
  return out;
}

absl::Status FinishExpertBiasStep(GptStage* stage, const MoeShape& moe, bool step_applied,
                                  const RankContext& context) {
  const std::vector<ExpertBias*> biases = StageExpertBiases(stage);
  if (biases.empty()) return absl::OkStatus();
  if (!step_applied) {
    for (ExpertBias* bias : biases) bias->ClearCounts();
    return absl::OkStatus();
  }
  // One all-reduce for all layers, as Megatron stacks them: [layers, experts] fp32
  // (token counts stay exact in fp32 below 2^24).
  const int64_t experts = moe.experts();
  std::vector<float> tokens;
  tokens.reserve(biases.size() * experts);
  for (const ExpertBias* bias : biases) {
    tokens.insert(tokens.end(), bias->step_tokens().begin(), bias->step_tokens().end());
  }
  RETURN_IF_ERROR(context.dp_cp().AllReduceSum(tokens.data(), static_cast<int64_t>(tokens.size())));
  for (size_t l = 0; l < biases.size(); ++l) {
    biases[l]->Update(absl::MakeConstSpan(tokens).subspan(l * experts, experts),
                      moe.bias_update_rate);
  }
  return absl::OkStatus();
}

}  // namespace conveyor
