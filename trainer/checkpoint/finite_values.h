// Loaded values that no run can continue from: NaN or infinite parameters or optimizer
// state. Such a checkpoint passes its checksums (it holds what the run wrote, after the
// run diverged); loading it would end the first step in NaN and advise a lower
// learning rate. Refused at load instead, naming the tensor.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_FINITE_VALUES_H_
#define CONVEYOR_TRAINER_CHECKPOINT_FINITE_VALUES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

// OK when the `n` values at `data` are all finite; else InvalidArgument naming
// `tensor`, the checkpoint folder `checkpoint` and how many of the `n` are NaN or
// infinite, with the fix (load an earlier iteration).
absl::Status CheckLoadedValuesFinite(const float* data, int64_t n, absl::string_view tensor,
                                     absl::string_view checkpoint);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_FINITE_VALUES_H_
