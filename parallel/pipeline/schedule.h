// Pipeline schedules by name: pure functions (P, V, M, rank) -> actions, compute and
// transfers (docs/design.md §2). The simulator, the tests and the executor all read
// the same lists; a new schedule is a new compute order (compute_order.h) and a line in
// the registry, never a change to the executor.
//
//   P = pipeline ranks, V = model chunks (virtual stages) per rank, M = micro-batches.
#ifndef CONVEYOR_PARALLEL_PIPELINE_SCHEDULE_H_
#define CONVEYOR_PARALLEL_PIPELINE_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "parallel/pipeline/action.h"

namespace conveyor {
namespace pipeline {

using ScheduleFn = absl::StatusOr<std::vector<Action>> (*)(int P, int V, int M, int rank);

struct Schedule {
  std::string name;
  // Where each (rank, chunk) sits in the pipeline; the executor needs it to give each
  // chunk its layers, the simulator to follow the data.
  StageLayout layout = StageLayout::kLoop;
  ScheduleFn actions = nullptr;
};

// The names --pipeline-schedule accepts, in the order they are documented.
const std::vector<std::string>& ScheduleNames();

// "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2" or "zbv"; NotFound lists them.
absl::StatusOr<Schedule> ScheduleByName(absl::string_view name);

// Every rank's list for one schedule and shape.
struct Plan {
  std::string schedule;
  StageLayout layout = StageLayout::kLoop;
  int num_ranks = 1;          // P
  int num_chunks = 1;         // V
  int num_micro_batches = 1;  // M
  std::vector<std::vector<Action>> ranks;

  int num_stages() const { return num_ranks * num_chunks; }
};

absl::StatusOr<Plan> MakePlan(absl::string_view schedule, int P, int V, int M);

// The micro-batches a prediction simulates for a step of M (a plan's lists hold
// O(P*V*M) actions, built P times): M itself up to max(kMaxSimulatedMicroBatches, 4P);
// beyond, the largest count up to that bound with M's remainder modulo P (the one rule
// on M, interleaved-1f1b's M % P == 0), which is more than 3P: every schedule's
// warm-up, steady state and cool-down, and the peak stash of all but GPipe's
// (PeakStashed in bubble.h), are those of M.
inline constexpr int kMaxSimulatedMicroBatches = 1024;
int SimulatedMicroBatches(int P, int M);

// The generators behind the registry, callable directly.
absl::StatusOr<std::vector<Action>> GpipeSchedule(int P, int V, int M, int rank);
absl::StatusOr<std::vector<Action>> OneFOneBSchedule(int P, int V, int M, int rank);
absl::StatusOr<std::vector<Action>> Interleaved1F1BSchedule(int P, int V, int M, int rank);
absl::StatusOr<std::vector<Action>> ZeroBubbleH1Schedule(int P, int V, int M, int rank);
absl::StatusOr<std::vector<Action>> ZeroBubbleH2Schedule(int P, int V, int M, int rank);
absl::StatusOr<std::vector<Action>> ZeroBubbleVSchedule(int P, int V, int M, int rank);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_SCHEDULE_H_
