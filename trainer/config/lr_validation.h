// The rules of Megatron's WSD schedule (--lr-decay-style WSD, --lr-wsd-decay-*) and of
// the decoupled learning rate (--decoupled-lr, --decoupled-min-lr): one problem line per
// broken rule, each naming its flag and the fix (part of ValidateConfig).
#ifndef CONVEYOR_TRAINER_CONFIG_LR_VALIDATION_H_
#define CONVEYOR_TRAINER_CONFIG_LR_VALIDATION_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

std::vector<std::string> WsdAndDecoupledLrProblems(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_LR_VALIDATION_H_
