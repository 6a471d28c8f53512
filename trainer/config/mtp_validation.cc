#include "trainer/config/mtp_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "proto/config_choices.h"
#include "trainer/config/attention_positions.h"

namespace conveyor {

std::vector<std::string> MtpProblems(const Config& config) {
  const ModelConfig& m = config.model();
  std::vector<std::string> out;
  if (m.mtp_num_layers() < 0) {
    out.push_back(absl::StrCat("--mtp-num-layers ", m.mtp_num_layers(),
                               " is negative: give the number of prediction depths, or 0 for "
                               "none"));
  }
  if (m.mtp_num_layers() <= 0) return out;
  const float lambda = m.mtp_loss_scaling_factor();
  if (!std::isfinite(lambda) || lambda < 0.0f) {
    out.push_back(absl::StrCat("--mtp-loss-scaling-factor ", lambda,
                               " must be a finite number >= 0 (Megatron's default 0.1)"));
  }
  // Megatron's depths add the rolled positions' rows of a learned table, whose copy on
  // the last pipeline stage it never keeps equal to the first stage's.
  if (ParseChoice<PositionEmbeddingType>(m.position_embedding_type()) ==
      PositionEmbeddingType::kLearnedAbsolute) {
    out.push_back(
        "--mtp-num-layers with --position-embedding-type learned_absolute: multi-token "
        "prediction with a learned position table is not implemented (DeepSeek-V3 uses RoPE); "
        "choose --position-embedding-type rope, yarn or none");
  }
  // No op of its own, but until it has trained on a GPU, refused there as context
  // parallelism is.
  if (ParseChoice<DeviceKind>(config.parallel().device()) == DeviceKind::kCuda) {
    out.push_back(absl::StrCat(
        "--mtp-num-layers ", m.mtp_num_layers(),
        " with --device cuda: multi-token prediction uses the CUDA backend's existing ops but "
        "has never run on a GPU; run it with --device cpu, or use --mtp-num-layers 0"));
  }
  if (!LayerWindowsFromConfig(m).empty()) {
    out.push_back(
        "--mtp-num-layers with --window-size: the prediction depths' sliding window is not "
        "implemented; drop --window-size or --mtp-num-layers");
  }
  return out;
}

}  // namespace conveyor
