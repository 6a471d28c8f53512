#include "parallel/nccl_communicator.h"

#include <chrono>
#include <exception>
#include <set>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "cuda_runtime.h"
#include "nccl.h"
#include "parallel/collective_failure.h"

namespace conveyor {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

std::string NcclError(ncclResult_t result, ncclComm_t comm) {
  std::string text = absl::StrFormat("%s (%d)", ncclGetErrorString(result), result);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') absl::StrAppend(&text, ": ", last);
  }
  return text;
}

std::string CudaError(cudaError_t error) {
  return absl::StrFormat("%s (%d): %s", cudaGetErrorName(error), error, cudaGetErrorString(error));
}

// Polls a non-blocking communicator until its pending work (init or an enqueue) is
// no longer in progress; false on deadline.
bool WaitNotInProgress(ncclComm_t comm, absl::Time deadline, ncclResult_t* state) {
  while (true) {
    ncclCommGetAsyncError(comm, state);
    if (*state != ncclInProgress) return true;
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ncclDataType_t NcclType(DType type) {
  switch (type) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kByte:
      return ncclUint8;
  }
  return ncclUint8;
}

// Rank 0 creates the id; the others read it (DirectoryStore::get waits `timeout`).
absl::StatusOr<ncclUniqueId> ShareUniqueId(const GroupSpec& group, RendezvousStore& store,
                                           const std::string& where, absl::Duration timeout) {
  ncclUniqueId id;
  if (group.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return absl::UnavailableError(
          absl::StrCat(where, ": ncclGetUniqueId: ", NcclError(r, nullptr)));
    }
    try {
      store.set(kUniqueIdKey, std::vector<char>(id.internal, id.internal + sizeof(id)));
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(where, ": ", e.what()));
    }
    return id;
  }
  std::vector<char> bytes;
  try {
    bytes = store.get(kUniqueIdKey);
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "%s: group rank 0 (global rank %d) never published the NCCL unique id within "
        "%s: %s",
        where, group.global_ranks[0], absl::FormatDuration(timeout), e.what()));
  }
  if (bytes.size() != sizeof(id)) {
    return absl::DataLossError(absl::StrFormat("%s: unique id has %d bytes, expected %d", where,
                                               bytes.size(), sizeof(id)));
  }
  std::copy(bytes.begin(), bytes.end(), id.internal);
  return id;
}

// The group's communicator, initialised non-blocking, so that a rank that never joins
// ends in a timeout, not a hang.
absl::StatusOr<ncclComm_t> InitComm(const GroupSpec& group, const ncclUniqueId& id,
                                    const std::string& where, absl::Duration timeout) {
  const int size = static_cast<int>(group.global_ranks.size());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, group.rank, &config);
  ncclResult_t state = r;
  if (r == ncclSuccess || r == ncclInProgress) {
    if (!WaitNotInProgress(comm, absl::Now() + timeout, &state)) {
      ncclCommAbort(comm);
      return absl::DeadlineExceededError(
          absl::StrFormat("%s: ncclCommInitRank did not complete within %s: not every rank joined",
                          where, absl::FormatDuration(timeout)));
    }
  }
  if (state != ncclSuccess) {
    const std::string error = NcclError(state, comm);
    if (comm != nullptr) ncclCommAbort(comm);
    return absl::UnavailableError(absl::StrCat(where, ": ncclCommInitRank: ", error));
  }
  return comm;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const GroupSpec& group, const RendezvousPoint& meeting, int cuda_device,
    absl::Duration timeout) {
  const int size = static_cast<int>(group.global_ranks.size());
  const std::string where = absl::StrCat("NCCL rendezvous of ", DescribeGroup(group));
  if (size < 1 || group.rank < 0 || group.rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: group rank %d not in [0, %d)", where, group.rank, size));
  }
  if (cudaError_t e = cudaSetDevice(cuda_device); e != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: cudaSetDevice(%d): %s", where, cuda_device, CudaError(e)));
  }
  // Apart from the group's gloo rendezvous, which may be under way at the same time.
  const std::string name = group.name + "-nccl";
  ASSIGN_OR_RETURN(std::unique_ptr<RendezvousStore> store, meeting.OpenStore(name, timeout));
  ASSIGN_OR_RETURN(std::unique_ptr<ProgressBoard> board, meeting.OpenBoard(name, group.rank, size));
  board->Post(0, "rendezvous");

  ASSIGN_OR_RETURN(const ncclUniqueId id, ShareUniqueId(group, *store, where, timeout));
  ASSIGN_OR_RETURN(ncclComm_t comm, InitComm(group, id, where, timeout));
  // The object owns the handles from here: its destructor releases what was created.
  std::unique_ptr<NcclCommunicator> created(
      new NcclCommunicator(group, comm, cuda_device, std::move(board), timeout));
  if (cudaError_t e = cudaStreamCreateWithFlags(&created->stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat(where, ": cudaStreamCreate: ", CudaError(e)));
  }
  if (cudaError_t e = cudaEventCreateWithFlags(&created->compute_done_, cudaEventDisableTiming);
      e != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat(where, ": cudaEventCreate: ", CudaError(e)));
  }
  if (cudaError_t e = cudaMalloc(&created->scratch_, sizeof(float)); e != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": cudaMalloc: ", CudaError(e)));
  }
  created->board_->Post(0, "idle");
  return created;
}

NcclCommunicator::NcclCommunicator(GroupSpec group, ncclComm* comm, int cuda_device,
                                   std::unique_ptr<ProgressBoard> board, absl::Duration timeout)
    : group_(std::move(group)),
      comm_(comm),
      cuda_device_(cuda_device),
      board_(std::move(board)),
      timeout_(timeout) {}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    // An aborted or broken communicator must not wait for peers on the way out.
    if (broken_.ok()) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

template <typename Enqueue>
absl::Status NcclCommunicator::Run(const char* op, bool collective, const std::vector<int>& peers,
                                   int64_t n, Enqueue enqueue) {
  RETURN_IF_ERROR(CheckOperation(group_, broken_, op, n));
  const int64_t seq = collective ? ++seq_ : seq_;
  board_->Post(seq, op);
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout_;

  CollectiveFailure failure;
  failure.op = op;
  failure.seq = seq;
  failure.collective = collective;
  failure.peers = peers;
  failure.timed_out = false;
  failure.timeout = timeout_;

  // The operands come from kernels on the compute stream (CUDA's legacy default
  // stream), which the communicator's non-blocking stream does not wait for by itself.
  // The caller may be a thread that never chose a device (the gradient-reduction
  // thread): the legacy stream and the event are this device's.
  ncclResult_t state = ncclSystemError;
  cudaError_t ordered = cudaSetDevice(cuda_device_);
  if (ordered == cudaSuccess) ordered = cudaEventRecord(compute_done_, cudaStreamLegacy);
  if (ordered == cudaSuccess) ordered = cudaStreamWaitEvent(stream_, compute_done_, 0);
  if (ordered != cudaSuccess) {
    failure.transport_error =
        absl::StrCat("ordering after the compute stream: ", CudaError(ordered));
  } else {
    state = static_cast<ncclResult_t>(enqueue());
  }
  if (ordered == cudaSuccess && (state == ncclSuccess || state == ncclInProgress)) {
    while (true) {
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) break;
      if (state == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return absl::OkStatus();
        if (q != cudaErrorNotReady) {
          failure.transport_error = absl::StrCat("cudaStreamQuery: ", CudaError(q));
          break;
        }
      }
      if (absl::Now() >= deadline) {
        failure.timed_out = true;
        failure.transport_error = "aborted the communicator at the deadline";
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  if (failure.transport_error.empty()) failure.transport_error = NcclError(state, comm_);
  // Kernels waiting for absent peers never finish; only an abort frees the stream.
  ncclCommAbort(comm_);
  comm_ = nullptr;
  failure.waited = absl::Now() - start;
  broken_ = CollectiveFailureStatus(failure, group_, board_->Read(), "nccl");
  return broken_;
}

absl::Status NcclCommunicator::DoAllReduceSum(const Buffer& data) {
  return Run("AllReduceSum", true, {}, data.count, [&] {
    return ncclAllReduce(data.data, data.data, data.count, NcclType(data.type), ncclSum, comm_,
                         stream_);
  });
}

absl::Status NcclCommunicator::DoAllReduceMax(const Buffer& data) {
  return Run("AllReduceMax", true, {}, data.count, [&] {
    return ncclAllReduce(data.data, data.data, data.count, NcclType(data.type), ncclMax, comm_,
                         stream_);
  });
}

absl::Status NcclCommunicator::DoAllGather(const ConstBuffer& in, const Buffer& out) {
  return Run("AllGather", true, {}, in.count, [&] {
    return ncclAllGather(in.data, out.data, in.count, NcclType(in.type), comm_, stream_);
  });
}

absl::Status NcclCommunicator::DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) {
  return Run("ReduceScatterSum", true, {}, out.count, [&] {
    return ncclReduceScatter(in.data, out.data, out.count, NcclType(in.type), ncclSum, comm_,
                             stream_);
  });
}

absl::Status NcclCommunicator::DoBroadcast(const Buffer& data, int root) {
  return Run("Broadcast", true, {}, data.count, [&] {
    return ncclBroadcast(data.data, data.data, data.count, NcclType(data.type), root, comm_,
                         stream_);
  });
}

absl::Status NcclCommunicator::Barrier() {
  return Run("Barrier", true, {}, 1, [&] {
    return ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_);
  });
}

absl::Status NcclCommunicator::DoBatchSendRecv(const std::vector<P2POp>& ops) {
  std::set<int> peers;
  for (const P2POp& op : ops) peers.insert(op.peer);
  return Run("BatchSendRecv", false, std::vector<int>(peers.begin(), peers.end()), 0, [&] {
    // One NCCL group: all posted together, so matched exchanges cannot deadlock.
    ncclResult_t r = ncclGroupStart();
    for (const P2POp& op : ops) {
      if (r != ncclSuccess && r != ncclInProgress) break;
      const Buffer& b = op.buffer;
      r = op.is_send ? ncclSend(b.data, b.count, NcclType(b.type), op.peer, comm_, stream_)
                     : ncclRecv(b.data, b.count, NcclType(b.type), op.peer, comm_, stream_);
    }
    const ncclResult_t end = ncclGroupEnd();
    return (r != ncclSuccess && r != ncclInProgress) ? r : end;
  });
}

}  // namespace conveyor
