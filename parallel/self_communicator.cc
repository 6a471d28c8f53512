#include "parallel/self_communicator.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace conveyor {

void SelfCommunicator::Copy(const ConstBuffer& from, const Buffer& to) const {
  if (from.data == to.data || from.count == 0) return;
  if (from.where == MemoryKind::kDevice) {
    transport_->Copy(to.data, from.data, from.bytes());
  } else {
    std::memmove(to.data, from.data, from.bytes());
  }
}

absl::Status SelfCommunicator::DoAllGather(const ConstBuffer& in, const Buffer& out) {
  Copy(in, out);
  return absl::OkStatus();
}

absl::Status SelfCommunicator::DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) {
  Copy(in, out);
  return absl::OkStatus();
}

absl::Status SelfCommunicator::DoBatchSendRecv(const std::vector<P2POp>& ops) {
  std::vector<const P2POp*> sends, recvs;
  for (const P2POp& op : ops) (op.is_send ? sends : recvs).push_back(&op);
  if (sends.size() != recvs.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("BatchSendRecv on group %s: %d sends to self but %d receives", name_,
                        sends.size(), recvs.size()));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    const Buffer& sent = sends[i]->buffer;
    const Buffer& received = recvs[i]->buffer;
    if (sent.count != received.count || sent.type != received.type) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "BatchSendRecv on group %s: send %d has %d %s elements but receive %d has %d %s", name_,
          i, sent.count, DTypeName(sent.type), i, received.count, DTypeName(received.type)));
    }
    Copy(sent, received);
  }
  return absl::OkStatus();
}

}  // namespace conveyor
