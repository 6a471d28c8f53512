// Which transformer layers are mixture-of-experts layers: Megatron's --moe-layer-freq,
// either an integer N (layers 0, N, 2N, ... are MoE, the rest dense) or a list
// expression of 0/1 per layer in Python's syntax, such as "([1]*3+[0]*1)*3" or
// "[0]+[1]*23" (lists, repetition by an integer, concatenation, parentheses).
#ifndef CONVEYOR_MODEL_MOE_LAYER_PATTERN_H_
#define CONVEYOR_MODEL_MOE_LAYER_PATTERN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

// One entry per layer (true: MoE); an error names --moe-layer-freq and the problem.
absl::StatusOr<std::vector<bool>> ParseMoeLayerFreq(absl::string_view text, int64_t num_layers);

// The list-expression grammar alone (no integer form, any integer entries, any length up
// to num_layers), for the other per-layer patterns (--window-attn-skip-freq); an error
// names `flag`.
absl::StatusOr<std::vector<int64_t>> ParseLayerListExpression(absl::string_view text,
                                                              int64_t num_layers,
                                                              absl::string_view flag);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_LAYER_PATTERN_H_
