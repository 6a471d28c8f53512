// The rules of the mixture-of-experts flags (--num-experts, --moe-*): one problem line
// per broken rule, each naming its flag and the fix (part of ValidateConfig).
#ifndef CONVEYOR_TRAINER_CONFIG_MOE_VALIDATION_H_
#define CONVEYOR_TRAINER_CONFIG_MOE_VALIDATION_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

std::vector<std::string> MoeProblems(const Config& config);

// The rules of --expert-model-parallel-size on `world_size` ranks: it needs
// --num-experts, must divide the experts and the data x context ranks (world / (TP x PP)).
std::vector<std::string> ExpertParallelProblems(const Config& config, int world_size);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_MOE_VALIDATION_H_
