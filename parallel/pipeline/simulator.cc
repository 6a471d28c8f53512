#include "parallel/pipeline/simulator.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace conveyor {
namespace pipeline {

double Costs::Of(ActionType type) const {
  switch (type) {
    case ActionType::kForward:
      return forward;
    case ActionType::kBackwardInput:
      return backward_input;
    case ActionType::kBackwardWeight:
      return backward_weight;
    case ActionType::kBackward:
      return backward_input + backward_weight;
    default:
      return p2p;
  }
}

namespace {

// Transfers from one rank to another, in the order they are posted. Activations and
// gradients share it: NCCL matches the sends and receives between two ranks in order,
// whatever they carry, so the executor relies on the same order on both sides.
using Channel = std::pair<int, int>;

struct Posted {
  Action action;
  int stage = 0;  // the poster's stage for this transfer
  double time = 0;
};

struct ChannelLog {
  std::vector<Posted> sends, recvs;
};

// Where one op of a posted batch sits in its channel.
struct BatchOp {
  Channel channel;
  bool is_send = false;
  size_t index = 0;
};

class Simulation {
 public:
  Simulation(const Plan& plan, const Costs& costs)
      : plan_(plan),
        costs_(costs),
        P_(plan.num_ranks),
        S_(plan.num_stages()),
        M_(plan.num_micro_batches),
        ranks_(P_),
        forward_(S_ * M_, false),
        backward_input_(S_ * M_, false),
        fused_(S_ * M_, false),
        weight_(S_ * M_, false),
        received_forward_(S_ * M_, false),
        received_backward_(S_ * M_, false) {}

  absl::StatusOr<SimulationResult> Run();

 private:
  struct RankState {
    size_t next = 0;
    double free_at = 0;
    bool posted = false;
    size_t batch_end = 0;
    std::vector<BatchOp> ops;
    int stashed = 0;
    int peak_stashed = 0;
    int sent = 0;
  };

  int Index(int stage, int micro_batch) const { return stage * M_ + micro_batch; }
  absl::Status Invalid(int rank, size_t pos, const Action& a, absl::string_view why) const {
    return absl::FailedPreconditionError(absl::StrCat("schedule ", plan_.schedule, ": rank ", rank,
                                                      " action #", pos, " ", ToString(a), ": ",
                                                      why));
  }
  absl::StatusOr<int> StageOf(int rank, size_t pos, const Action& a) const;
  absl::Status RunCompute(int rank, const Action& a);
  absl::Status PostBatch(int rank);
  // True when the batch completed.
  absl::StatusOr<bool> TryComplete(int rank);
  std::string DeadlockReport() const;

  const Plan& plan_;
  const Costs costs_;
  const int P_, S_, M_;
  std::vector<RankState> ranks_;
  std::vector<bool> forward_, backward_input_, fused_, weight_;
  std::vector<bool> received_forward_, received_backward_;  // by the receiving stage
  std::map<Channel, ChannelLog> channels_;
  SimulationResult result_;
};

absl::StatusOr<int> Simulation::StageOf(int rank, size_t pos, const Action& a) const {
  if (a.chunk < 0 || a.chunk >= plan_.num_chunks) {
    return Invalid(rank, pos, a, absl::StrCat("chunk outside 0..", plan_.num_chunks - 1));
  }
  if (a.micro_batch < 0 || a.micro_batch >= M_) {
    return Invalid(rank, pos, a, absl::StrCat("micro-batch outside 0..", M_ - 1));
  }
  return GlobalStage(plan_.layout, P_, rank, a.chunk);
}

absl::Status Simulation::RunCompute(int rank, const Action& a) {
  RankState& state = ranks_[rank];
  const size_t pos = state.next;
  ASSIGN_OR_RETURN(const int s, StageOf(rank, pos, a));
  const int i = Index(s, a.micro_batch);
  const bool input_gradient_done = backward_input_[i] || fused_[i];
  switch (a.type) {
    case ActionType::kForward: {
      if (forward_[i]) return Invalid(rank, pos, a, "runs twice");
      if (s > 0) {
        const StageOwner prev = OwnerOfStage(plan_.layout, P_, s - 1);
        const bool have =
            prev.rank == rank ? forward_[Index(s - 1, a.micro_batch)] : received_forward_[i];
        if (!have) {
          return Invalid(rank, pos, a,
                         absl::StrCat("its input from stage ", s - 1, " (rank ", prev.rank,
                                      ") has not arrived: no earlier ",
                                      prev.rank == rank ? "local forward" : "receive"));
        }
      }
      forward_[i] = true;
      state.peak_stashed = std::max(state.peak_stashed, ++state.stashed);
      break;
    }
    case ActionType::kBackwardInput:
    case ActionType::kBackward: {
      if (input_gradient_done) return Invalid(rank, pos, a, "backward runs twice");
      if (!forward_[i]) return Invalid(rank, pos, a, "runs before its forward");
      if (s < S_ - 1) {
        const StageOwner next = OwnerOfStage(plan_.layout, P_, s + 1);
        const int j = Index(s + 1, a.micro_batch);
        const bool have =
            next.rank == rank ? (backward_input_[j] || fused_[j]) : received_backward_[i];
        if (!have) {
          return Invalid(rank, pos, a,
                         absl::StrCat("its output gradient from stage ", s + 1, " (rank ",
                                      next.rank, ") has not arrived: no earlier ",
                                      next.rank == rank ? "local backward" : "receive"));
        }
      }
      if (a.type == ActionType::kBackward) {
        fused_[i] = true;
        --state.stashed;
      } else {
        backward_input_[i] = true;
      }
      break;
    }
    case ActionType::kBackwardWeight: {
      if (weight_[i]) return Invalid(rank, pos, a, "runs twice");
      if (!backward_input_[i]) return Invalid(rank, pos, a, "runs before its B");
      weight_[i] = true;
      --state.stashed;
      break;
    }
    default:
      break;
  }
  const double cost = costs_.Of(a.type);
  result_.timeline.ranks[rank].push_back({a, state.free_at, state.free_at + cost});
  state.free_at += cost;
  ++state.next;
  return absl::OkStatus();
}

absl::Status Simulation::PostBatch(int rank) {
  RankState& state = ranks_[rank];
  const std::vector<Action>& list = plan_.ranks[rank];
  state.ops.clear();
  size_t end = state.next;
  while (end < list.size() && IsP2p(list[end])) ++end;
  for (size_t pos = state.next; pos < end; ++pos) {
    const Action& a = list[pos];
    ASSIGN_OR_RETURN(const int s, StageOf(rank, pos, a));
    const bool forward = IsForwardP2p(a.type);
    const bool send = IsSend(a.type);
    // Activations go to stage s+1 and come from s-1; gradients the other way.
    const int other = (forward == send) ? s + 1 : s - 1;
    if (other < 0 || other >= S_) {
      return Invalid(rank, pos, a, absl::StrCat("stage ", s, " has no stage ", other));
    }
    const StageOwner owner = OwnerOfStage(plan_.layout, P_, other);
    if (owner.rank != a.peer || owner.rank == rank) {
      return Invalid(rank, pos, a,
                     absl::StrCat("stage ", other, " lives on rank ", owner.rank,
                                  owner.rank == rank ? ", this rank: no transfer needed"
                                                     : absl::StrCat(", not ", a.peer)));
    }
    const int i = Index(s, a.micro_batch);
    if (send && forward && !forward_[i]) {
      return Invalid(rank, pos, a, "sends an activation before its forward ran");
    }
    if (send && !forward && !(backward_input_[i] || fused_[i])) {
      return Invalid(rank, pos, a, "sends a gradient before its backward ran");
    }
    const Channel channel = send ? Channel{rank, a.peer} : Channel{a.peer, rank};
    ChannelLog& log = channels_[channel];
    std::vector<Posted>& side = send ? log.sends : log.recvs;
    side.push_back({a, s, state.free_at});
    state.ops.push_back({channel, send, side.size() - 1});
  }
  state.batch_end = end;
  state.posted = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> Simulation::TryComplete(int rank) {
  RankState& state = ranks_[rank];
  for (const BatchOp& op : state.ops) {
    if (op.is_send && !costs_.blocking_sends) continue;
    const ChannelLog& log = channels_[op.channel];
    if ((op.is_send ? log.recvs : log.sends).size() <= op.index) return false;
  }
  double done = state.free_at;
  for (size_t k = 0; k < state.ops.size(); ++k) {
    const BatchOp& op = state.ops[k];
    const ChannelLog& log = channels_[op.channel];
    const Posted& mine = (op.is_send ? log.sends : log.recvs)[op.index];
    if (op.is_send && !costs_.blocking_sends) {
      // The receiver checks the pairing when its receive completes.
      result_.timeline.ranks[rank].push_back({mine.action, mine.time, mine.time});
      ++state.sent;
      ++result_.p2p_messages;
      continue;
    }
    const Posted& theirs = (op.is_send ? log.recvs : log.sends)[op.index];
    const Posted& send = op.is_send ? mine : theirs;
    const Posted& recv = op.is_send ? theirs : mine;
    const bool forward = IsForwardP2p(send.action.type);
    if (IsForwardP2p(recv.action.type) != forward ||
        send.action.micro_batch != recv.action.micro_batch ||
        recv.stage != send.stage + (forward ? 1 : -1)) {
      return Invalid(rank, state.next + k, mine.action,
                     absl::StrCat("meets rank ", mine.action.peer, "'s ", ToString(theirs.action),
                                  ": transfers between two ranks must come in the same "
                                  "order on both sides"));
    }
    const double end = std::max(mine.time, theirs.time) + costs_.p2p;
    result_.timeline.ranks[rank].push_back({mine.action, mine.time, end});
    done = std::max(done, end);
    if (op.is_send) {
      ++state.sent;
      ++result_.p2p_messages;
    } else {
      const int i = Index(recv.stage, recv.action.micro_batch);
      (forward ? received_forward_ : received_backward_)[i] = true;
    }
  }
  state.free_at = done;
  state.next = state.batch_end;
  state.posted = false;
  return true;
}

std::string Simulation::DeadlockReport() const {
  std::vector<std::string> stuck;
  for (int rank = 0; rank < P_; ++rank) {
    const RankState& state = ranks_[rank];
    if (state.next >= plan_.ranks[rank].size()) continue;
    std::vector<std::string> waiting;
    for (const BatchOp& op : state.ops) {
      const ChannelLog& log = channels_.at(op.channel);
      const Posted& mine = (op.is_send ? log.sends : log.recvs)[op.index];
      if ((op.is_send ? log.recvs : log.sends).size() > op.index) continue;
      waiting.push_back(ToString(mine.action));
    }
    stuck.push_back(absl::StrCat("rank ", rank, " waits at action #", state.next, " on ",
                                 absl::StrJoin(waiting, " "),
                                 " (its partner rank has not "
                                 "posted the matching transfer)"));
  }
  return absl::StrCat("schedule ", plan_.schedule, " deadlocks: ", absl::StrJoin(stuck, "; "));
}

absl::StatusOr<SimulationResult> Simulation::Run() {
  if (static_cast<int>(plan_.ranks.size()) != P_) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan has ", plan_.ranks.size(), " rank lists for P=", P_));
  }
  result_.timeline.ranks.resize(P_);
  while (true) {
    bool progress = false;
    bool finished = true;
    for (int rank = 0; rank < P_; ++rank) {
      RankState& state = ranks_[rank];
      const std::vector<Action>& list = plan_.ranks[rank];
      while (state.next < list.size()) {
        const Action& a = list[state.next];
        if (IsCompute(a)) {
          RETURN_IF_ERROR(RunCompute(rank, a));
          progress = true;
          continue;
        }
        if (!state.posted) {
          RETURN_IF_ERROR(PostBatch(rank));
          progress = true;
        }
        ASSIGN_OR_RETURN(bool completed, TryComplete(rank));
        if (!completed) break;
        progress = true;
      }
      finished = finished && state.next >= list.size();
    }
    if (finished) break;
    if (!progress) return absl::AbortedError(DeadlockReport());
  }
  // Every stage must run F and a full backward for every micro-batch exactly once.
  for (int s = 0; s < S_; ++s) {
    for (int m = 0; m < M_; ++m) {
      const int i = Index(s, m);
      const StageOwner owner = OwnerOfStage(plan_.layout, P_, s);
      std::string missing;
      if (!forward_[i]) {
        missing = "F";
      } else if (!fused_[i] && !backward_input_[i]) {
        missing = "B";
      } else if (backward_input_[i] && !weight_[i]) {
        missing = "W";
      }
      if (!missing.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "schedule ", plan_.schedule, ": rank ", owner.rank, " never runs ", missing,
            " of micro-batch ", m, " on chunk ", owner.chunk, " (stage ", s, ")"));
      }
    }
  }
  const TimelineUsage usage = MeasureUsage(result_.timeline);
  result_.makespan = usage.makespan;
  result_.bubble_fraction = usage.bubble_fraction;
  for (int rank = 0; rank < P_; ++rank) {
    RankReport report;
    report.busy = usage.ranks[rank].busy;
    report.idle = usage.ranks[rank].idle;
    report.bubble_fraction = usage.ranks[rank].bubble_fraction;
    report.peak_stashed = ranks_[rank].peak_stashed;
    report.messages_sent = ranks_[rank].sent;
    result_.ranks.push_back(report);
  }
  return std::move(result_);
}

}  // namespace

absl::StatusOr<SimulationResult> Simulate(const Plan& plan, const Costs& costs) {
  return Simulation(plan, costs).Run();
}

}  // namespace pipeline
}  // namespace conveyor
