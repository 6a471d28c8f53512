// The DeviceTransport of the CUDA backend: NCCL communicators for device buffers, and
// CUDA's unified addressing to copy between any two buffers, host or device.
#ifndef CONVEYOR_PARALLEL_NCCL_TRANSPORT_H_
#define CONVEYOR_PARALLEL_NCCL_TRANSPORT_H_

#include <string>

#include "parallel/device_transport.h"

namespace conveyor {

class NcclTransport : public DeviceTransport {
 public:
  // `cuda_device`: this rank's GPU (the backend's, LOCAL_RANK).
  explicit NcclTransport(int cuda_device) : cuda_device_(cuda_device) {}

  const std::string& name() const override { return name_; }
  void Copy(void* dst, const void* src, size_t bytes) const override;
  absl::StatusOr<std::unique_ptr<Communicator>> Connect(const GroupSpec& group,
                                                        const RendezvousPoint& meeting,
                                                        absl::Duration timeout) const override;

 private:
  int cuda_device_;
  std::string name_ = "nccl";
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_NCCL_TRANSPORT_H_
