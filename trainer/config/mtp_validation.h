// The rules of the multi-token prediction flags (--mtp-num-layers,
// --mtp-loss-scaling-factor): one problem line per broken rule, each naming its flag and
// the fix (part of ValidateConfig).
#ifndef CONVEYOR_TRAINER_CONFIG_MTP_VALIDATION_H_
#define CONVEYOR_TRAINER_CONFIG_MTP_VALIDATION_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

std::vector<std::string> MtpProblems(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_MTP_VALIDATION_H_
