#include "trainer/host_staging.h"

namespace conveyor {

float* HostStaging::HostData(Tensor* t, bool download) {
  if (t->device() == Device::kCpu) return t->data();
  Tensor host = download ? t->To(Device::kCpu, MemoryCategory::kOther)
                         : Tensor::Zeros(t->shape(), MemoryCategory::kOther, t->dtype());
  float* data = host.data();
  staged_.emplace_back(t, std::move(host));
  return data;
}

void HostStaging::Upload() {
  for (auto& [device_tensor, host] : staged_) device_tensor->CopyFrom(host);
}

}  // namespace conveyor
