#include "trainer/training_data_turns.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/checkpoint/load_agreement.h"

namespace conveyor {
namespace {

// What the ranks of each turn do, for the messages of those that wait for them.
constexpr const char* kTurns[] = {
    "build or load the sample indices in its --data-cache-path (global rank 0, first)",
    "build or load the sample indices in its --data-cache-path (each node's first rank, "
    "after rank 0)",
    "build or load the sample indices in its --data-cache-path (the other ranks, last)"};
constexpr int kTurnCount = 3;

int TurnOf(int rank, int local_rank) {
  if (rank == 0) return 0;
  return local_rank == 0 ? 1 : 2;
}

}  // namespace

absl::StatusOr<DataSplits> BuildTrainingDataInTurns(const Config& resolved_config,
                                                    const SplitSampleCounts& counts,
                                                    Communicator& world, int local_rank) {
  auto build = [&] {
    return BuildTrainingData(resolved_config, counts.train, counts.valid, counts.test);
  };
  if (resolved_config.data().data_cache_path().empty() || resolved_config.data().mock_data()) {
    return build();
  }
  const int mine = TurnOf(world.rank(), local_rank);
  std::optional<absl::StatusOr<DataSplits>> built;
  for (int turn = 0; turn < kTurnCount; ++turn) {
    if (turn == mine) built = build();
    const absl::Status ours = turn == mine ? built->status() : absl::OkStatus();
    const absl::Status verdict = AgreeAcrossRanks(world, ours, kTurns[turn]);
    if (verdict.ok()) continue;
    // The collective itself failed (parallel/collective_failure.h): the ranks of this
    // turn took longer than --distributed-timeout-minutes, or one of them died. Any
    // other error is this rank's own, or names the ranks of the turn that failed.
    if (!ours.ok() || (!absl::IsDeadlineExceeded(verdict) && !absl::IsUnavailable(verdict))) {
      return verdict;
    }
    return absl::Status(verdict.code(), absl::StrCat("waiting for the ranks whose turn it was to ",
                                                     kTurns[turn], ": ", verdict.message()));
  }
  return *std::move(built);
}

}  // namespace conveyor
