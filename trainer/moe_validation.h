// The rules of the mixture-of-experts flags (--num-experts, --moe-*): one problem line
// per broken rule, each naming its flag and the fix (part of ValidateConfig).
#ifndef CONVEYOR_TRAINER_MOE_VALIDATION_H_
#define CONVEYOR_TRAINER_MOE_VALIDATION_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

std::vector<std::string> MoeProblems(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_MOE_VALIDATION_H_
