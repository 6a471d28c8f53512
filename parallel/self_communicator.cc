#include "parallel/self_communicator.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

absl::Status CheckCount(const std::string& group, const char* op, int64_t n) {
  if (n >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s on group %s: negative element count %d", op, group, n));
}

}  // namespace

void SelfCommunicator::CopyFloats(const float* from, int64_t n, float* to) const {
  if (from == to || n == 0) return;
  if (transport_ != nullptr) {
    transport_->Copy(to, from, n * sizeof(float));
  } else {
    std::copy(from, from + n, to);
  }
}

absl::Status SelfCommunicator::AllReduceSum(float*, int64_t n) {
  return CheckCount(name_, "AllReduceSum", n);
}

absl::Status SelfCommunicator::AllReduceSum(double*, int64_t n) {
  return CheckCount(name_, "AllReduceSum", n);
}

absl::Status SelfCommunicator::AllReduceMax(double*, int64_t n) {
  return CheckCount(name_, "AllReduceMax", n);
}

absl::Status SelfCommunicator::AllGather(const float* in, int64_t n_per_rank, float* out) {
  RETURN_IF_ERROR(CheckCount(name_, "AllGather", n_per_rank));
  CopyFloats(in, n_per_rank, out);
  return absl::OkStatus();
}

absl::Status SelfCommunicator::ReduceScatterSum(const float* in, int64_t n_per_rank, float* out) {
  RETURN_IF_ERROR(CheckCount(name_, "ReduceScatterSum", n_per_rank));
  CopyFloats(in, n_per_rank, out);
  return absl::OkStatus();
}

absl::Status SelfCommunicator::Broadcast(float*, int64_t n, int root) {
  if (root != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Broadcast on group %s: root %d is not a rank of this 1-rank group", name_, root));
  }
  return CheckCount(name_, "Broadcast", n);
}

absl::Status SelfCommunicator::Barrier() { return absl::OkStatus(); }

absl::Status SelfCommunicator::BatchSendRecv(const std::vector<P2POp>& ops) {
  std::vector<const P2POp*> sends, recvs;
  for (const P2POp& op : ops) {
    if (op.peer != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "BatchSendRecv on group %s: peer %d is not a rank of this 1-rank group", name_, op.peer));
    }
    (op.is_send ? sends : recvs).push_back(&op);
  }
  if (sends.size() != recvs.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("BatchSendRecv on group %s: %d sends to self but %d receives", name_,
                        sends.size(), recvs.size()));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->n != recvs[i]->n) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "BatchSendRecv on group %s: send %d has %d elements but receive %d has %d", name_, i,
          sends[i]->n, i, recvs[i]->n));
    }
    CopyFloats(sends[i]->data, sends[i]->n, recvs[i]->data);
  }
  return absl::OkStatus();
}

}  // namespace conveyor
