// How process groups reach an accelerator's memory. The model's tensors live on the
// device while the trainer's bookkeeping (losses, norms, votes, checkpoint outcomes)
// stays in host memory, and both cross the same groups. A ParallelState built with a
// transport therefore gives every group of two or more ranks two communicators, the
// host one (gloo) and the transport's (NCCL), and routes each operation by the memory
// its buffers declare (RoutedCommunicator); one-rank groups copy through the transport.
#ifndef CONVEYOR_PARALLEL_DEVICE_TRANSPORT_H_
#define CONVEYOR_PARALLEL_DEVICE_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/communicator.h"
#include "parallel/group.h"
#include "parallel/rendezvous_point.h"

namespace conveyor {

class DeviceTransport {
 public:
  virtual ~DeviceTransport() = default;

  virtual const std::string& name() const = 0;  // for messages, e.g. "nccl"

  // Copies `bytes` between any two buffers, host or device; done when it returns.
  virtual void Copy(void* dst, const void* src, size_t bytes) const = 0;

  // A communicator over device buffers for `group`. Every member calls this
  // concurrently; the rendezvous happens at `meeting` and is bounded by `timeout`,
  // as is every later operation.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Connect(const GroupSpec& group,
                                                                const RendezvousPoint& meeting,
                                                                absl::Duration timeout) const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_DEVICE_TRANSPORT_H_
