#include "parallel/nccl_transport.h"

#include "base/status_macros.h"
#include "cuda_runtime.h"
#include "parallel/nccl_communicator.h"
#include "runtime/cuda/cuda_check.h"

namespace conveyor {

void NcclTransport::Copy(void* dst, const void* src, size_t bytes) const {
  // On this rank's device whatever thread calls (see NcclCommunicator): ordered after
  // the work queued on its legacy stream.
  CUDA_CHECK(cudaSetDevice(cuda_device_));
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclTransport::Connect(const GroupSpec& group,
                                                                     const RendezvousPoint& meeting,
                                                                     absl::Duration timeout) const {
  ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm,
                   NcclCommunicator::Create(group, meeting, cuda_device_, timeout));
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace conveyor
