#include "parallel/pipeline/p2p_placement.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor {
namespace pipeline {
namespace {

double IdealCost(ActionType type) { return type == ActionType::kBackward ? 2.0 : 1.0; }

bool IsInputGradient(ActionType type) {
  return type == ActionType::kBackwardInput || type == ActionType::kBackward;
}

// Start and end of every compute in the ideal timeline: each rank runs its list in
// order, each compute as soon as the rank is free and its inputs exist.
struct IdealTimes {
  std::vector<std::vector<double>> start, end;
};

absl::StatusOr<IdealTimes> IdealTimeline(StageLayout layout, int V, const ComputeOrder& order) {
  const int P = static_cast<int>(order.size());
  const int stages = P * V;
  // (stage, micro-batch) -> end of its F, of its B (input gradient).
  std::map<std::pair<int, int>, double> forward_end, backward_end;
  IdealTimes times;
  times.start.resize(P);
  times.end.resize(P);
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0);
  size_t remaining = 0;
  for (const auto& actions : order) remaining += actions.size();
  while (remaining > 0) {
    bool progress = false;
    for (int rank = 0; rank < P; ++rank) {
      while (next[rank] < order[rank].size()) {
        const Action& a = order[rank][next[rank]];
        const int stage = GlobalStage(layout, P, rank, a.chunk);
        double ready = free_at[rank];
        bool waiting = false;
        auto need = [&](const std::map<std::pair<int, int>, double>& done, int s) {
          auto it = done.find({s, a.micro_batch});
          if (it == done.end()) {
            waiting = true;
          } else {
            ready = std::max(ready, it->second);
          }
        };
        if (a.type == ActionType::kForward) {
          if (stage > 0) need(forward_end, stage - 1);
        } else if (IsInputGradient(a.type)) {
          need(forward_end, stage);
          if (stage < stages - 1) need(backward_end, stage + 1);
        } else {
          need(backward_end, stage);
        }
        if (waiting) break;
        const double end = ready + IdealCost(a.type);
        times.start[rank].push_back(ready);
        times.end[rank].push_back(end);
        free_at[rank] = end;
        if (a.type == ActionType::kForward) forward_end[{stage, a.micro_batch}] = end;
        if (IsInputGradient(a.type)) backward_end[{stage, a.micro_batch}] = end;
        ++next[rank];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      std::string stuck;
      for (int rank = 0; rank < P; ++rank) {
        if (next[rank] < order[rank].size()) {
          absl::StrAppend(&stuck, " rank ", rank, " at ", ToString(order[rank][next[rank]]), ";");
        }
      }
      return absl::InternalError(
          absl::StrCat("compute order can never finish, every rank waits on a later "
                       "compute:",
                       stuck));
    }
  }
  return times;
}

// A rank can post a batch at position i (just before its compute i; i = n is after the
// last) any time in [end of compute i-1, start of compute i] without delaying anything.
struct Windows {
  std::vector<double> lo, hi;
};

Windows PostingWindows(const std::vector<double>& start, const std::vector<double>& end) {
  Windows w;
  const size_t n = start.size();
  for (size_t i = 0; i <= n; ++i) {
    w.lo.push_back(i == 0 ? 0.0 : end[i - 1]);
    w.hi.push_back(i == n ? std::numeric_limits<double>::infinity() : start[i]);
  }
  return w;
}

struct Message {
  double ready = 0;  // end of the producing compute
  int from = 0, to = 0;
  size_t producer = 0, consumer = 0;  // compute indices on `from` and `to`
  Action send, recv;
  double meet = 0;  // when both sides post, in the ideal timeline
  size_t send_pos = 0, recv_pos = 0;
};

constexpr double kEps = 1e-9;

// Chooses where both sides post: the earliest time `meet` >= lower that lies in a
// posting window of the sender after the producer and of the receiver no later than the
// consumer, so neither side waits. If there is none, the receiver posts in its first
// window that reaches `lower` (still before the consumer, which starts after the data
// is ready) and the sender in its last window opening by then; the sender may then wait
// a little, which is what Megatron's lock-step batches cost too.
void Place(const Windows& sender, const Windows& receiver, double lower, Message* m) {
  size_t p = m->producer + 1;
  size_t q = 0;
  while (q < receiver.hi.size() && receiver.hi[q] < lower - kEps) ++q;
  while (p < sender.lo.size() && q <= m->consumer) {
    const double lo = std::max({sender.lo[p], receiver.lo[q], lower});
    const double hi = std::min(sender.hi[p], receiver.hi[q]);
    if (lo <= hi + kEps) {
      m->meet = lo;
      m->send_pos = p;
      m->recv_pos = q;
      return;
    }
    if (sender.hi[p] < receiver.hi[q]) {
      ++p;
    } else {
      ++q;
    }
  }
  q = 0;
  while (q < m->consumer && receiver.hi[q] < lower - kEps) ++q;
  m->meet = std::max(lower, receiver.lo[q]);
  m->recv_pos = q;
  p = m->producer + 1;
  while (p + 1 < sender.lo.size() && sender.lo[p + 1] <= m->meet + kEps) ++p;
  m->send_pos = p;
}

// Per rank: (type, micro-batch, chunk) -> compute index, to find each message's
// consumer (an input gradient is looked up as the backward it starts).
using ConsumerIndex = std::map<std::tuple<ActionType, int, int>, size_t>;

std::vector<ConsumerIndex> ConsumerIndices(const ComputeOrder& order) {
  std::vector<ConsumerIndex> index(order.size());
  for (size_t rank = 0; rank < order.size(); ++rank) {
    for (size_t i = 0; i < order[rank].size(); ++i) {
      const Action& a = order[rank][i];
      const ActionType type = IsInputGradient(a.type) ? ActionType::kBackward : a.type;
      index[rank][{type, a.micro_batch, a.chunk}] = i;
    }
  }
  return index;
}

// The messages between ranks: a forward's output to the next stage, an input gradient
// to the previous one, each from its producer to its consumer (hand-overs between two
// chunks of one rank are local and send nothing).
absl::StatusOr<std::vector<Message>> Messages(StageLayout layout, int V, const ComputeOrder& order,
                                              const IdealTimes& times) {
  const int P = static_cast<int>(order.size());
  const int stages = P * V;
  const std::vector<ConsumerIndex> index = ConsumerIndices(order);
  std::vector<Message> messages;
  for (int rank = 0; rank < P; ++rank) {
    for (size_t i = 0; i < order[rank].size(); ++i) {
      const Action& a = order[rank][i];
      const int stage = GlobalStage(layout, P, rank, a.chunk);
      int to_stage;
      ActionType send, recv, consumer;
      if (a.type == ActionType::kForward && stage < stages - 1) {
        to_stage = stage + 1;
        send = ActionType::kSendForward;
        recv = ActionType::kRecvForward;
        consumer = ActionType::kForward;
      } else if (IsInputGradient(a.type) && stage > 0) {
        to_stage = stage - 1;
        send = ActionType::kSendBackward;
        recv = ActionType::kRecvBackward;
        consumer = ActionType::kBackward;
      } else {
        continue;
      }
      const StageOwner to = OwnerOfStage(layout, P, to_stage);
      if (to.rank == rank) continue;  // a local hand-over
      auto consumer_it = index[to.rank].find({consumer, a.micro_batch, to.chunk});
      if (consumer_it == index[to.rank].end()) {
        return absl::InternalError(absl::StrCat("rank ", to.rank, " never consumes what ",
                                                ToString(a), " on rank ", rank, " sends"));
      }
      Message m;
      m.ready = times.end[rank][i];
      m.from = rank;
      m.to = to.rank;
      m.producer = i;
      m.consumer = consumer_it->second;
      m.send = {send, a.micro_batch, a.chunk, to.rank};
      m.recv = {recv, a.micro_batch, to.chunk, rank};
      messages.push_back(m);
    }
  }
  return messages;
}

// Places every message (Place), in send order, so that each channel's meeting times
// only grow: the k-th send on a channel then meets the k-th receive.
void PlaceMessages(const std::vector<Windows>& windows, std::vector<Message>* messages) {
  std::stable_sort(messages->begin(), messages->end(), [](const Message& x, const Message& y) {
    return std::make_tuple(x.ready, x.from, x.producer) <
           std::make_tuple(y.ready, y.from, y.producer);
  });
  std::map<std::pair<int, int>, double> channel_meet;
  for (Message& m : *messages) {
    double& last = channel_meet[{m.from, m.to}];
    Place(windows[m.from], windows[m.to], std::max(m.ready, last), &m);
    last = m.meet;
  }
}

// Each rank's computes with the placed messages' sends and receives posted between
// them, those at one position ordered by meeting time.
std::vector<std::vector<Action>> Interleave(const ComputeOrder& order,
                                            const std::vector<Message>& messages) {
  const size_t P = order.size();
  std::vector<std::vector<std::vector<std::pair<std::pair<double, double>, Action>>>> at(P);
  for (size_t rank = 0; rank < P; ++rank) at[rank].resize(order[rank].size() + 1);
  for (const Message& m : messages) {
    at[m.from][m.send_pos].push_back({{m.meet, m.ready}, m.send});
    at[m.to][m.recv_pos].push_back({{m.meet, m.ready}, m.recv});
  }
  std::vector<std::vector<Action>> lists(P);
  for (size_t rank = 0; rank < P; ++rank) {
    for (size_t i = 0; i <= order[rank].size(); ++i) {
      auto& batch = at[rank][i];
      std::stable_sort(batch.begin(), batch.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& entry : batch) lists[rank].push_back(entry.second);
      if (i < order[rank].size()) lists[rank].push_back(order[rank][i]);
    }
  }
  return lists;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<Action>>> AddP2p(StageLayout layout, int V,
                                                        const ComputeOrder& order) {
  ASSIGN_OR_RETURN(IdealTimes times, IdealTimeline(layout, V, order));
  std::vector<Windows> windows;
  for (size_t rank = 0; rank < order.size(); ++rank) {
    windows.push_back(PostingWindows(times.start[rank], times.end[rank]));
  }
  ASSIGN_OR_RETURN(std::vector<Message> messages, Messages(layout, V, order, times));
  PlaceMessages(windows, &messages);
  return Interleave(order, messages);
}

}  // namespace pipeline
}  // namespace conveyor
