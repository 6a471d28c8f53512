#include "model/recompute.h"

namespace conveyor {

bool RecomputePolicy::Recomputes(int64_t index) const {
  switch (full) {
    case Full::kNone:
      return false;
    case Full::kUniform:
      return true;
    case Full::kBlock:
      return index < num_layers;
  }
  return false;
}

bool RecomputePolicy::KeepsCheckpoint(int64_t index) const {
  if (!Recomputes(index)) return false;
  return full == Full::kBlock || index % num_layers == 0;
}

int64_t RecomputePolicy::GroupStart(int64_t index) const {
  return full == Full::kUniform ? index - index % num_layers : index;
}

}  // namespace conveyor
