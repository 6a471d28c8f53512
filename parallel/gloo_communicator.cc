#include "parallel/gloo_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "parallel/collective_failure.h"
#include "parallel/rank_environment.h"

namespace conveyor {
namespace {

// gloo matches a receive to a send by (peer, slot). Collectives and point-to-point
// traffic get disjoint slot ranges; within a collective each phase has its own slot.
uint64_t CollectiveSlot(int64_t seq, int phase) {
  return (uint64_t{1} << 56) | (static_cast<uint64_t>(phase) << 48) |
         (static_cast<uint64_t>(seq) & ((uint64_t{1} << 48) - 1));
}
uint64_t PointToPointSlot(uint64_t message) {
  return (uint64_t{2} << 56) | (message & ((uint64_t{1} << 56) - 1));
}

// The element range rank r owns in a reduction over n elements split size ways.
struct Chunk {
  int64_t begin;
  int64_t length;
};
Chunk SplitChunk(int64_t n, int size, int r) {
  const int64_t base = n / size, extra = n % size;
  return {base * r + std::min<int64_t>(r, extra), base + (r < extra ? 1 : 0)};
}

// gloo's connectFullMesh passes its context's timeout to every store wait, and Create
// shortens that timeout (see ConnectTimeout); the store's own timeout, the group's, is
// the one meant for waiting on peers' keys.
class GroupTimeoutStore : public gloo::rendezvous::Store {
 public:
  explicit GroupTimeoutStore(RendezvousStore& store) : store_(store) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    store_.wait(keys);
  }

 private:
  RendezvousStore& store_;
};

// The timeout to give gloo's context while it connects. gloo (Debian's git 2022-05-18,
// tcp/pair.h, Pair::waitUntil) waits five times its timeout for a pair to connect, "a
// longer timeout when waiting for initial connect": with the group's timeout itself, a
// rank whose peer died after publishing its address waited 5 x
// --distributed-timeout-minutes. A fifth keeps that wait within the group's timeout.
// WholeMilliseconds rounds it up to 1 ms at least: a timeout under 5 ms would otherwise
// give gloo 0 ms, which it reads as no timeout at all.
std::chrono::milliseconds ConnectTimeout(absl::Duration timeout) {
  return WholeMilliseconds(timeout / 5);
}

// Before connecting, every member marks its arrival under this key and waits for all the
// others' marks: a missing rank is named here, after the group's timeout, and once all
// have arrived the connections take milliseconds.
std::string ArrivalKey(int group_rank) { return absl::StrCat("arrived_", group_rank); }

// The members whose arrival is not in `store`; nullopt when the store cannot answer.
std::optional<std::vector<std::string>> MissingMembers(const GroupSpec& group,
                                                       RendezvousStore& store) {
  std::vector<std::string> missing;
  try {
    for (int r = 0; r < static_cast<int>(group.global_ranks.size()); ++r) {
      if (!store.Has(ArrivalKey(r))) {
        missing.push_back(
            absl::StrFormat("group rank %d (global rank %d)", r, group.global_ranks[r]));
      }
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return missing;
}

}  // namespace

// The transfers of one operation: all posted first, then all waited against one
// deadline. gloo throws on timeout or a broken connection; Run() catches it. When a wait
// fails, the peers whose transfers had not completed are kept (stalled()): with every
// rank inside the collective, they are what the failure message can name.
class GlooCommunicator::Transfers {
 public:
  Transfers(gloo::Context& context, absl::Time deadline) : context_(context), deadline_(deadline) {}

  void Send(const void* data, size_t bytes, int peer, uint64_t slot) {
    if (bytes == 0) return;  // both sides skip empty chunks alike
    // gloo's buffer type is not const-correct; a send only reads.
    auto buffer = context_.createUnboundBuffer(const_cast<void*>(data), bytes);
    buffer->send(peer, slot);
    pending_.push_back({std::move(buffer), true, peer});
  }
  void Recv(void* data, size_t bytes, int peer, uint64_t slot) {
    if (bytes == 0) return;
    auto buffer = context_.createUnboundBuffer(data, bytes);
    buffer->recv(peer, slot);
    pending_.push_back({std::move(buffer), false, peer});
  }
  void WaitAll() {
    for (size_t i = 0; i < pending_.size(); ++i) {
      try {
        Wait(pending_[i], deadline_);
      } catch (...) {
        NoteStalled(i);
        throw;
      }
    }
    pending_.clear();
  }

  const std::vector<int>& stalled() const { return stalled_; }

 private:
  struct Pending {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    bool is_send;
    int peer;
  };

  static void Wait(Pending& p, absl::Time deadline) {
    const std::chrono::milliseconds left = WholeMilliseconds(deadline - absl::Now());
    if (p.is_send) {
      p.buffer->waitSend(left);
    } else {
      p.buffer->waitRecv(left);
    }
  }

  // pending_[failed]'s wait threw: its peer, and the peer of every later transfer that
  // had not completed either. gloo reports a completed transfer without looking at the
  // failure its first timeout spread to the context's pairs, so a wait of a millisecond
  // tells the two apart.
  void NoteStalled(size_t failed) {
    std::set<int> peers = {pending_[failed].peer};
    for (size_t j = failed + 1; j < pending_.size(); ++j) {
      try {
        Wait(pending_[j], absl::Now() + absl::Milliseconds(1));
      } catch (...) {
        peers.insert(pending_[j].peer);
      }
    }
    stalled_.assign(peers.begin(), peers.end());
  }

  gloo::Context& context_;
  absl::Time deadline_;
  std::vector<Pending> pending_;
  std::vector<int> stalled_;
};

absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateGlooDevice(
    const std::string& hostname, const std::string& interface) {
  try {
    gloo::transport::tcp::attr attr;
    if (interface.empty()) {
      attr.hostname = hostname;
    } else {
      attr.iface = interface;
    }
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    if (!interface.empty()) {
      return absl::UnavailableError(absl::StrFormat(
          "gloo: cannot create a TCP device on interface \"%s\" (%s): %s; name an interface "
          "this host has (ip -brief address lists them), or unset %s",
          interface, kGlooInterfaceEnv, e.what(), kGlooInterfaceEnv));
    }
    return absl::UnavailableError(
        absl::StrFormat("gloo: cannot create a TCP device on host \"%s\": %s", hostname, e.what()));
  }
}

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const GroupSpec& group, const RendezvousPoint& meeting,
    std::shared_ptr<gloo::transport::Device> device, absl::Duration timeout) {
  const int size = static_cast<int>(group.global_ranks.size());
  if (size < 1 || group.rank < 0 || group.rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat("gloo: %s: group rank %d is not in [0, %d)",
                                                      DescribeGroup(group), group.rank, size));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RendezvousStore> store, meeting.OpenStore(group.name, timeout));
  ASSIGN_OR_RETURN(std::unique_ptr<ProgressBoard> board,
                   meeting.OpenBoard(group.name, group.rank, size));
  board->Post(0, "rendezvous");

  const absl::Time start = absl::Now();
  auto failure = [&](const std::string& what, const std::string& error) {
    const std::optional<std::vector<std::string>> missing = MissingMembers(group, *store);
    std::string arrivals;
    if (!missing.has_value()) {
      arrivals = "arrivals unknown: the rendezvous store stopped answering";
    } else if (!missing->empty()) {
      arrivals = "ranks that never arrived: " + absl::StrJoin(*missing, ", ");
    } else {
      // Who had not finished connecting: their boards still say "rendezvous" (a rank
      // that died after arriving stays so).
      std::vector<std::string> connecting;
      const std::vector<ProgressBoard::Entry> entries = board->Read();
      for (int r = 0; r < size; ++r) {
        if (r != group.rank && !entries[r].unknown && entries[r].activity != "idle" &&
            entries[r].seq <= 0) {
          connecting.push_back(
              absl::StrFormat("group rank %d (global rank %d)", r, group.global_ranks[r]));
        }
      }
      arrivals = connecting.empty()
                     ? std::string("every rank arrived")
                     : "every rank arrived; not connected: " + absl::StrJoin(connecting, ", ") +
                           " (still connecting, or died after arriving)";
    }
    const std::string message = absl::StrFormat(
        "rendezvous of %s in %s failed after %s (timeout %s) while %s: %s; %s",
        DescribeGroup(group), meeting.Describe(),
        absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
        absl::FormatDuration(timeout), what, arrivals, error);
    return missing.has_value() && !missing->empty() ? absl::DeadlineExceededError(message)
                                                    : absl::UnavailableError(message);
  };

  try {
    store->set(ArrivalKey(group.rank), {});
    std::vector<std::string> everyone;
    for (int r = 0; r < size; ++r) everyone.push_back(ArrivalKey(r));
    store->wait(everyone);
  } catch (const std::exception& e) {
    return failure("waiting for the members to arrive", e.what());
  }

  auto context = std::make_shared<gloo::rendezvous::Context>(group.rank, size);
  context->setTimeout(ConnectTimeout(timeout));
  try {
    GroupTimeoutStore keys(*store);
    context->connectFullMesh(keys, device);
  } catch (const std::exception& e) {
    return failure("connecting", absl::StrCat("gloo: ", e.what()));
  }
  context->setTimeout(WholeMilliseconds(timeout));
  board->Post(0, "idle");
  return std::unique_ptr<GlooCommunicator>(
      new GlooCommunicator(group, std::move(context), std::move(board), timeout));
}

GlooCommunicator::GlooCommunicator(GroupSpec group, std::shared_ptr<gloo::Context> context,
                                   std::unique_ptr<ProgressBoard> board, absl::Duration timeout)
    : group_(std::move(group)),
      context_(std::move(context)),
      board_(std::move(board)),
      timeout_(timeout),
      sends_to_(group_.global_ranks.size(), 0),
      recvs_from_(group_.global_ranks.size(), 0) {}

GlooCommunicator::~GlooCommunicator() = default;

absl::Status GlooCommunicator::CheckUsable(const char* op, int64_t n) const {
  return CheckOperation(group_, broken_, op, n);
}

template <typename Body>
absl::Status GlooCommunicator::Run(const char* op, bool collective, const std::vector<int>& peers,
                                   Body body) {
  const int64_t seq = collective ? ++seq_ : seq_;
  board_->Post(seq, op);
  const absl::Time start = absl::Now();
  Transfers transfers(*context_, start + timeout_);
  std::string error;
  try {
    body(seq, transfers);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    error = e.what();
  }
  CollectiveFailure failure;
  failure.op = op;
  failure.seq = seq;
  failure.collective = collective;
  failure.peers = peers;
  // gloo's words for its own deadline ("Timed out waiting 2000ms for recv ...").
  failure.timed_out = error.find("Timed out") != std::string::npos;
  failure.waited = absl::Now() - start;
  failure.timeout = timeout_;
  failure.transport_error = error;
  failure.stalled = transfers.stalled();
  broken_ = CollectiveFailureStatus(failure, group_, board_->Read(), "gloo");
  return broken_;
}

absl::Status GlooCommunicator::Reduce(const char* op, Reduction reduction, const ConstBuffer& in,
                                      const Buffer& out, int64_t n, bool scatter_only) {
  RETURN_IF_ERROR(CheckUsable(op, n));
  const int s = size(), me = rank();
  const int64_t element = static_cast<int64_t>(SizeOf(in.type));
  const char* from = static_cast<const char*>(in.data);
  char* to = static_cast<char*>(out.data);
  if (s == 1) {
    if (from != to) std::memmove(to, from, n * element);
    return absl::OkStatus();
  }
  // Chunk r of `in`: equal slices for a reduce-scatter, a near-even split otherwise.
  auto chunk = [&](int r) { return scatter_only ? Chunk{r * n, n} : SplitChunk(n, s, r); };
  return Run(op, /*collective=*/true, {}, [&](int64_t seq, Transfers& t) {
    const Chunk mine = chunk(me);
    const int64_t mine_bytes = mine.length * element;
    // Every rank's contribution to my chunk, in rank order; mine is copied in too,
    // because the result may overwrite it (in place) before it is added.
    scratch_.resize(mine_bytes * s);
    char* parts = scratch_.data();
    std::memcpy(parts + me * mine_bytes, from + mine.begin * element, mine_bytes);
    for (int peer = 0; peer < s; ++peer) {
      if (peer == me) continue;
      const Chunk theirs = chunk(peer);
      t.Send(from + theirs.begin * element, theirs.length * element, peer, CollectiveSlot(seq, 0));
      t.Recv(parts + peer * mine_bytes, mine_bytes, peer, CollectiveSlot(seq, 0));
    }
    t.WaitAll();
    char* result = scatter_only ? to : to + mine.begin * element;
    ReduceInRankOrder(reduction, in.type, parts, s, mine.length, result);
    if (scatter_only) return;
    for (int peer = 0; peer < s; ++peer) {
      if (peer == me) continue;
      const Chunk theirs = chunk(peer);
      t.Send(result, mine_bytes, peer, CollectiveSlot(seq, 1));
      t.Recv(to + theirs.begin * element, theirs.length * element, peer, CollectiveSlot(seq, 1));
    }
    t.WaitAll();
  });
}

absl::Status GlooCommunicator::DoAllReduceSum(const Buffer& data) {
  return Reduce("AllReduceSum", Reduction::kSum, data, data, data.count, false);
}

absl::Status GlooCommunicator::DoAllReduceMax(const Buffer& data) {
  return Reduce("AllReduceMax", Reduction::kMax, data, data, data.count, false);
}

absl::Status GlooCommunicator::DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) {
  return Reduce("ReduceScatterSum", Reduction::kSum, in, out, out.count, true);
}

absl::Status GlooCommunicator::DoAllGather(const ConstBuffer& in, const Buffer& out) {
  RETURN_IF_ERROR(CheckUsable("AllGather", in.count));
  const int s = size(), me = rank();
  const size_t bytes = in.bytes();
  char* const gathered = static_cast<char*>(out.data);
  char* const mine = gathered + me * bytes;
  if (in.data != mine && bytes > 0) std::memmove(mine, in.data, bytes);
  if (s == 1) return absl::OkStatus();
  return Run("AllGather", true, {}, [&](int64_t seq, Transfers& t) {
    for (int peer = 0; peer < s; ++peer) {
      if (peer == me) continue;
      t.Send(mine, bytes, peer, CollectiveSlot(seq, 0));
      t.Recv(gathered + peer * bytes, bytes, peer, CollectiveSlot(seq, 0));
    }
    t.WaitAll();
  });
}

absl::Status GlooCommunicator::DoBroadcast(const Buffer& data, int root) {
  RETURN_IF_ERROR(CheckUsable("Broadcast", data.count));
  const int s = size(), me = rank();
  if (s == 1) return absl::OkStatus();
  return Run("Broadcast", true, {}, [&](int64_t seq, Transfers& t) {
    if (me == root) {
      for (int peer = 0; peer < s; ++peer) {
        if (peer != me) t.Send(data.data, data.bytes(), peer, CollectiveSlot(seq, 0));
      }
    } else {
      t.Recv(data.data, data.bytes(), root, CollectiveSlot(seq, 0));
    }
    t.WaitAll();
  });
}

absl::Status GlooCommunicator::Barrier() {
  RETURN_IF_ERROR(CheckUsable("Barrier", 0));
  const int s = size(), me = rank();
  if (s == 1) return absl::OkStatus();
  // A one-byte token to and from every peer: nobody leaves before all have entered.
  std::vector<char> tokens(2 * s, 0);
  return Run("Barrier", true, {}, [&](int64_t seq, Transfers& t) {
    for (int peer = 0; peer < s; ++peer) {
      if (peer == me) continue;
      t.Send(&tokens[peer], 1, peer, CollectiveSlot(seq, 0));
      t.Recv(&tokens[s + peer], 1, peer, CollectiveSlot(seq, 0));
    }
    t.WaitAll();
  });
}

absl::Status GlooCommunicator::DoBatchSendRecv(const std::vector<P2POp>& ops) {
  RETURN_IF_ERROR(CheckUsable("BatchSendRecv", 0));
  std::set<int> peers;
  for (const P2POp& op : ops) {
    if (op.peer == rank()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("BatchSendRecv on %s: peer %d is this rank; gloo sends only to the "
                          "other group ranks",
                          DescribeGroup(group_), op.peer));
    }
    peers.insert(op.peer);
  }
  return Run("BatchSendRecv", false, std::vector<int>(peers.begin(), peers.end()),
             [&](int64_t, Transfers& t) {
               for (const P2POp& op : ops) {
                 const size_t bytes = op.buffer.bytes();
                 if (op.is_send) {
                   t.Send(op.buffer.data, bytes, op.peer, PointToPointSlot(sends_to_[op.peer]++));
                 } else {
                   t.Recv(op.buffer.data, bytes, op.peer, PointToPointSlot(recvs_from_[op.peer]++));
                 }
               }
               t.WaitAll();
             });
}

}  // namespace conveyor
