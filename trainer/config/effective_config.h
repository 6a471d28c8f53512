// The effective config as Megatron prints its arguments at start: every setting,
// defaults included, one per line, sorted by name, so a log says exactly what ran.
#ifndef CONVEYOR_TRAINER_CONFIG_EFFECTIVE_CONFIG_H_
#define CONVEYOR_TRAINER_CONFIG_EFFECTIVE_CONFIG_H_

#include <string>

#include "proto/config.pb.h"

namespace conveyor {

std::string FormatEffectiveConfig(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_EFFECTIVE_CONFIG_H_
