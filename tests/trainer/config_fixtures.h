// Configs the trainer's tests start from.
#ifndef CONVEYOR_TESTS_TRAINER_CONFIG_FIXTURES_H_
#define CONVEYOR_TESTS_TRAINER_CONFIG_FIXTURES_H_

#include <cstdint>
#include <string>

#include "proto/config.pb.h"

namespace conveyor {
namespace testing_util {

// The smallest config validation accepts: the defaults, mock data and a vocabulary.
Config SmallestValidConfig();

// TinyConfig (layout_runs.h) on one rank for iterations up to `last` at a constant
// global batch and learning rate, saving to and resuming from `dir`: a batch schedule's
// run is compared with a chain of these segments.
Config ConstantBatchSegment(int32_t global_batch, int32_t last, const std::string& dir);

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_TRAINER_CONFIG_FIXTURES_H_
