#include "parallel/communicator.h"

#include <cstdint>
#include <initializer_list>

#include "absl/algorithm/container.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "profiler/recorder.h"

namespace conveyor {
namespace {

constexpr DType kSummable[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat64};
constexpr DType kScatterSummable[] = {DType::kFloat32, DType::kBFloat16};
constexpr DType kMaxable[] = {DType::kFloat64};
constexpr DType kAny[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat64,
                          DType::kInt32,   DType::kInt64,    DType::kByte};

absl::Status Invalid(const Communicator& comm, const char* op, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s on group %s: %s", op, comm.name(), problem));
}

// What every operation asks of its buffers: counts not negative, an address wherever
// there are elements, a type from `allowed` (the same in all of them when
// `same_type`), and one memory kind, which `comm` reaches.
absl::Status CheckBuffers(const Communicator& comm, const char* op, absl::Span<const DType> allowed,
                          bool same_type, absl::Span<const ConstBuffer> buffers) {
  int on_device = 0;
  for (const ConstBuffer& b : buffers) {
    if (b.count < 0) {
      return Invalid(comm, op, absl::StrFormat("negative element count %d", b.count));
    }
    if (b.count > 0 && b.data == nullptr) {
      return Invalid(comm, op, absl::StrFormat("a buffer of %d elements has no address", b.count));
    }
    if (absl::c_find(allowed, b.type) == allowed.end()) {
      std::vector<std::string> names;
      for (DType t : allowed) names.emplace_back(DTypeName(t));
      return Invalid(comm, op,
                     absl::StrFormat("%s elements are not supported; it takes %s",
                                     DTypeName(b.type), absl::StrJoin(names, ", ")));
    }
    if (same_type && b.type != buffers.front().type) {
      return Invalid(comm, op,
                     absl::StrFormat("its buffers hold %s and %s elements; give them one type",
                                     DTypeName(buffers.front().type), DTypeName(b.type)));
    }
    if (b.where == MemoryKind::kDevice) ++on_device;
  }
  if (on_device != 0 && on_device != static_cast<int>(buffers.size())) {
    return Invalid(comm, op,
                   absl::StrFormat("%d of its %d buffers are declared in device memory and the "
                                   "others in host memory; no transport carries one operation "
                                   "across both, so keep all of an operation's buffers on one side",
                                   on_device, buffers.size()));
  }
  const MemoryKind where = on_device > 0 ? MemoryKind::kDevice : MemoryKind::kHost;
  if (!buffers.empty() && !comm.Reaches(where)) {
    return Invalid(comm, op,
                   absl::StrFormat("its buffers are declared in %s, which this group's "
                                   "communicator does not move",
                                   MemoryKindName(where)));
  }
  return absl::OkStatus();
}

// `part` lies inside `whole` at `slot` (the in-place form of a gather or scatter), or
// apart from it: any other overlap would let the operation overwrite what it still reads.
absl::Status CheckInPlace(const Communicator& comm, const char* op, const ConstBuffer& whole,
                          const ConstBuffer& part, int slot, const char* part_name,
                          const char* whole_name) {
  if (part.count == 0) return absl::OkStatus();
  const auto begin = [](const ConstBuffer& b) { return reinterpret_cast<uintptr_t>(b.data); };
  const uintptr_t slot_begin = begin(whole) + static_cast<uintptr_t>(slot * part.bytes());
  const bool apart =
      begin(part) + part.bytes() <= begin(whole) || begin(whole) + whole.bytes() <= begin(part);
  if (apart || begin(part) == slot_begin) return absl::OkStatus();
  return Invalid(comm, op,
                 absl::StrFormat("`%s` overlaps `%s` other than as its slot %d (this rank's, "
                                 "the in-place form); pass separate buffers or exactly that slot",
                                 part_name, whole_name, slot));
}

// --profile (profiler/recorder.h): what a call's span says, made only while recording.
std::string SpanArgs(const Communicator& comm, int64_t bytes) {
  if (!profiler::Recorder::Global().active()) return {};
  return absl::StrFormat("\"bytes\": %d, \"group\": \"%s\"", bytes, comm.name());
}

}  // namespace

absl::Status Communicator::AllReduceSum(Buffer data) {
  RETURN_IF_ERROR(CheckBuffers(*this, "AllReduceSum", kSummable, true, {data}));
  const profiler::Scope span("comm", "AllReduceSum", SpanArgs(*this, data.bytes()));
  Count(2 * data.bytes() * (size() - 1) / size());
  return DoAllReduceSum(data);
}

absl::Status Communicator::AllReduceMax(Buffer data) {
  RETURN_IF_ERROR(CheckBuffers(*this, "AllReduceMax", kMaxable, true, {data}));
  const profiler::Scope span("comm", "AllReduceMax", SpanArgs(*this, data.bytes()));
  Count(2 * data.bytes() * (size() - 1) / size());
  return DoAllReduceMax(data);
}

absl::Status Communicator::AllGather(ConstBuffer in, Buffer out) {
  constexpr char kOp[] = "AllGather";
  RETURN_IF_ERROR(CheckBuffers(*this, kOp, kAny, true, {in, out}));
  if (out.count != in.count * size()) {
    return Invalid(*this, kOp,
                   absl::StrFormat("`out` holds %d elements, not %d ranks x %d (`in`)", out.count,
                                   size(), in.count));
  }
  RETURN_IF_ERROR(CheckInPlace(*this, kOp, out, in, rank(), "in", "out"));
  const profiler::Scope span("comm", kOp, SpanArgs(*this, out.bytes()));
  Count(in.bytes() * (size() - 1));
  return DoAllGather(in, out);
}

absl::Status Communicator::ReduceScatterSum(ConstBuffer in, Buffer out) {
  constexpr char kOp[] = "ReduceScatterSum";
  RETURN_IF_ERROR(CheckBuffers(*this, kOp, kScatterSummable, true, {in, out}));
  if (in.count != out.count * size()) {
    return Invalid(*this, kOp,
                   absl::StrFormat("`in` holds %d elements, not %d ranks x %d (`out`)", in.count,
                                   size(), out.count));
  }
  RETURN_IF_ERROR(CheckInPlace(*this, kOp, in, out, rank(), "out", "in"));
  const profiler::Scope span("comm", kOp, SpanArgs(*this, in.bytes()));
  Count(in.bytes() * (size() - 1) / size());
  return DoReduceScatterSum(in, out);
}

absl::Status Communicator::Broadcast(Buffer data, int root) {
  RETURN_IF_ERROR(CheckBuffers(*this, "Broadcast", kAny, true, {data}));
  if (root < 0 || root >= size()) {
    return Invalid(*this, "Broadcast",
                   absl::StrFormat("root %d is not a group rank in [0, %d)", root, size()));
  }
  const profiler::Scope span("comm", "Broadcast", SpanArgs(*this, data.bytes()));
  if (rank() == root) Count(data.bytes() * (size() - 1));
  return DoBroadcast(data, root);
}

absl::Status Communicator::BatchSendRecv(const std::vector<P2POp>& ops) {
  std::vector<ConstBuffer> buffers;
  for (const P2POp& op : ops) {
    if (op.peer < 0 || op.peer >= size()) {
      return Invalid(*this, "BatchSendRecv",
                     absl::StrFormat("peer %d is not a group rank in [0, %d)", op.peer, size()));
    }
    buffers.push_back(op.buffer);
  }
  RETURN_IF_ERROR(CheckBuffers(*this, "BatchSendRecv", kAny, false, buffers));
  if (ops.empty()) return absl::OkStatus();
  int64_t bytes = 0;
  for (const ConstBuffer& b : buffers) bytes += b.bytes();
  const profiler::Scope span("comm", "BatchSendRecv", SpanArgs(*this, bytes));
  int64_t sent = 0;
  for (const P2POp& op : ops) sent += op.is_send ? op.buffer.bytes() : 0;
  Count(sent);
  return DoBatchSendRecv(ops);
}

}  // namespace conveyor
