// Host copies of device tensors, for code that reads or writes host memory: the
// checkpoint writer and reader, and the Hugging Face import. A host tensor is used in
// place, so on the CPU backend staging costs nothing.
#ifndef CONVEYOR_TRAINER_HOST_STAGING_H_
#define CONVEYOR_TRAINER_HOST_STAGING_H_

#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace conveyor {

class HostStaging {
 public:
  // The host address of `t`'s fp32 elements: t's own on the host; otherwise a staging
  // copy, filled from the device when `download` (saving) and left zero otherwise
  // (loading). `t` must outlive the staging.
  float* HostData(Tensor* t, bool download);

  // Copies every staging copy back into its device tensor (after loading).
  void Upload();

 private:
  std::vector<std::pair<Tensor*, Tensor>> staged_;  // device tensor, its host copy
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HOST_STAGING_H_
