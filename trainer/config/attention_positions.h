// The flags of RoPE's long-context scalings (Llama 3.1's --use-rope-scaling, YaRN's
// --position-embedding-type yarn) and of sliding-window attention (--window-size,
// --window-attn-skip-freq), with Megatron's meaning: their rules (part of ValidateConfig)
// and their reading into the model's plain numbers (ModelShape's rope_scaling and
// layer_windows).
#ifndef CONVEYOR_TRAINER_CONFIG_ATTENTION_POSITIONS_H_
#define CONVEYOR_TRAINER_CONFIG_ATTENTION_POSITIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"
#include "proto/config_choices.h"
#include "runtime/rope_scaling.h"

namespace conveyor {

// Megatron's --window-size (left, right): keys left positions before a query and right
// after it; -1 is an unbounded side.
struct WindowSize {
  int64_t left = -1;
  int64_t right = -1;
};

// "L,R" or "(L,R)" (Megatron's tuple_type); empty text: no window.
absl::StatusOr<std::optional<WindowSize>> ParseWindowSize(absl::string_view text);

// Each layer's window (AttentionMask::window: keys at most that many positions back, -1
// unbounded), or empty when no layer slides. `m` must be valid.
std::vector<int64_t> LayerWindowsFromConfig(const ModelConfig& m);

// The scaling of RoPE's frequencies that `positions` and the flags ask for.
RopeScaling RopeScalingFromConfig(const ModelConfig& m, PositionEmbeddingType positions);

// One problem line per broken rule, naming its flag and the fix.
std::vector<std::string> AttentionPositionProblems(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_ATTENTION_POSITIONS_H_
