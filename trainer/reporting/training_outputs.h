// Where a run's reports go: the log, the JSON metrics lines and TensorBoard; each may be
// null (ranks other than the logging one write none).
#ifndef CONVEYOR_TRAINER_REPORTING_TRAINING_OUTPUTS_H_
#define CONVEYOR_TRAINER_REPORTING_TRAINING_OUTPUTS_H_

#include <ostream>

#include "trainer/reporting/tensorboard/megatron_scalars.h"

namespace conveyor {

struct TrainingOutputs {
  std::ostream* log = nullptr;      // log lines and the memory report; may be null
  std::ostream* metrics = nullptr;  // JSON lines; may be null
  tensorboard::MegatronScalars* tensorboard = nullptr;  // --tensorboard-dir; may be null
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_TRAINING_OUTPUTS_H_
