#include "model/model_shape.h"

namespace conveyor {

int64_t PipelineMessageElements(int64_t tokens, int64_t hidden, int tp_size,
                                bool sequence_parallel) {
  return tokens / (sequence_parallel ? tp_size : 1) * hidden;
}

}  // namespace conveyor
