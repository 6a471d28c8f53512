#include "parallel/pipeline/schedule.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "parallel/pipeline/compute_order.h"
#include "parallel/pipeline/p2p_placement.h"

namespace conveyor {
namespace pipeline {
namespace {

using OrderFn = absl::StatusOr<ComputeOrder> (*)(int P, int V, int M);

absl::Status CheckShape(int P, int V, int M) {
  std::vector<std::string> problems;
  if (P < 1) problems.push_back(absl::StrCat("pipeline ranks P=", P, " must be >= 1"));
  if (V < 1) problems.push_back(absl::StrCat("virtual stages per rank V=", V, " must be >= 1"));
  if (M < 1) problems.push_back(absl::StrCat("micro-batches M=", M, " must be >= 1"));
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

// One rank's list; the other ranks' compute orders are built too, because where a
// receive goes depends on when the sender sends. That is O(P*V*M), cheap.
absl::StatusOr<std::vector<Action>> RankList(OrderFn order_fn, StageLayout layout, int P, int V,
                                             int M, int rank) {
  RETURN_IF_ERROR(CheckShape(P, V, M));
  if (rank < 0 || rank >= P) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline rank ", rank, " is outside 0..", P - 1));
  }
  ASSIGN_OR_RETURN(ComputeOrder order, order_fn(P, V, M));
  ASSIGN_OR_RETURN(std::vector<std::vector<Action>> lists, AddP2p(layout, V, order));
  return std::move(lists[rank]);
}

}  // namespace

absl::StatusOr<std::vector<Action>> GpipeSchedule(int P, int V, int M, int rank) {
  return RankList(GpipeOrder, StageLayout::kLoop, P, V, M, rank);
}
absl::StatusOr<std::vector<Action>> OneFOneBSchedule(int P, int V, int M, int rank) {
  return RankList(OneFOneBOrder, StageLayout::kLoop, P, V, M, rank);
}
absl::StatusOr<std::vector<Action>> Interleaved1F1BSchedule(int P, int V, int M, int rank) {
  return RankList(Interleaved1F1BOrder, StageLayout::kLoop, P, V, M, rank);
}
absl::StatusOr<std::vector<Action>> ZeroBubbleH1Schedule(int P, int V, int M, int rank) {
  return RankList(ZeroBubbleH1Order, StageLayout::kLoop, P, V, M, rank);
}
absl::StatusOr<std::vector<Action>> ZeroBubbleH2Schedule(int P, int V, int M, int rank) {
  return RankList(ZeroBubbleH2Order, StageLayout::kLoop, P, V, M, rank);
}
absl::StatusOr<std::vector<Action>> ZeroBubbleVSchedule(int P, int V, int M, int rank) {
  return RankList(ZeroBubbleVOrder, StageLayout::kVShape, P, V, M, rank);
}

const std::vector<std::string>& ScheduleNames() {
  static const auto* names =
      new std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv"};
  return *names;
}

absl::StatusOr<Schedule> ScheduleByName(absl::string_view name) {
  if (name == "gpipe") return Schedule{"gpipe", StageLayout::kLoop, GpipeSchedule};
  if (name == "1f1b") return Schedule{"1f1b", StageLayout::kLoop, OneFOneBSchedule};
  if (name == "interleaved-1f1b") {
    return Schedule{"interleaved-1f1b", StageLayout::kLoop, Interleaved1F1BSchedule};
  }
  if (name == "zb-h1") return Schedule{"zb-h1", StageLayout::kLoop, ZeroBubbleH1Schedule};
  if (name == "zb-h2") return Schedule{"zb-h2", StageLayout::kLoop, ZeroBubbleH2Schedule};
  if (name == "zbv") return Schedule{"zbv", StageLayout::kVShape, ZeroBubbleVSchedule};
  return absl::NotFoundError(absl::StrCat("unknown --pipeline-schedule '", name,
                                          "'; choose one of ",
                                          absl::StrJoin(ScheduleNames(), ", ")));
}

absl::StatusOr<Plan> MakePlan(absl::string_view schedule, int P, int V, int M) {
  ASSIGN_OR_RETURN(Schedule found, ScheduleByName(schedule));
  Plan plan;
  plan.schedule = found.name;
  plan.layout = found.layout;
  plan.num_ranks = P;
  plan.num_chunks = V;
  plan.num_micro_batches = M;
  for (int rank = 0; rank < P; ++rank) {
    ASSIGN_OR_RETURN(std::vector<Action> actions, found.actions(P, V, M, rank));
    plan.ranks.push_back(std::move(actions));
  }
  return plan;
}

int SimulatedMicroBatches(int P, int M) {
  const int64_t bound = std::max<int64_t>(kMaxSimulatedMicroBatches, int64_t{4} * P);
  if (P < 1 || M <= bound) return M;
  const int64_t excess = (int64_t{M} - bound) % P;  // bound + excess == M (mod P)
  return static_cast<int>(excess == 0 ? bound : bound - P + excess);
}

}  // namespace pipeline
}  // namespace conveyor
