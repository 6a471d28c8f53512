#include "trainer/checkpoint/load_agreement.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "parallel/group.h"

namespace conveyor {
namespace {

// Every rank's `row` (the same length on every rank), as a rank-major table on every
// rank. A sum in which each rank fills only its own row: every other addend is zero,
// so the small integers the rows hold arrive exactly.
absl::StatusOr<std::vector<double>> GatherRows(Communicator& world,
                                               const std::vector<double>& row) {
  std::vector<double> table(row.size() * world.size(), 0.0);
  std::copy(row.begin(), row.end(), table.begin() + world.rank() * row.size());
  RETURN_IF_ERROR(world.AllReduceSum(table.data(), int64_t(table.size())));
  return table;
}

// The verdict on failures, once `table` (rows of `width`, the first element of each
// 1 where that rank failed) is gathered: this rank's own error first, so that its
// message is the one it reports.
absl::Status FailureVerdict(const absl::StatusOr<std::vector<double>>& table, size_t width,
                            const absl::Status& mine, absl::string_view what) {
  if (!mine.ok()) return mine;
  RETURN_IF_ERROR(table.status());
  std::vector<int> failed;
  for (size_t r = 0; r * width < table->size(); ++r) {
    if ((*table)[r * width] != 0.0) failed.push_back(int(r));
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::AbortedError(
      absl::StrFormat("stopping before training: rank(s) %s could not %s (their errors say why)",
                      FormatRanks(failed), what));
}

std::string Describe(const LoadedCheckpointId& id) {
  if (!id.iteration.has_value()) return "no checkpoint (starting from iteration 0)";
  return absl::StrFormat("iteration %d (%d samples consumed)", *id.iteration, id.consumed_samples);
}

// "rank 0: iteration 20 (160 samples consumed); ranks 1-3: no checkpoint (...)": one
// entry per distinct checkpoint, in the order of each one's first rank.
std::string DescribeGroups(const std::vector<LoadedCheckpointId>& loaded) {
  std::vector<std::pair<LoadedCheckpointId, std::vector<int>>> groups;
  for (int r = 0; r < int(loaded.size()); ++r) {
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == loaded[r]; });
    if (same == groups.end()) same = groups.insert(groups.end(), {loaded[r], {}});
    same->second.push_back(r);
  }
  std::vector<std::string> parts;
  for (const auto& [id, ranks] : groups) {
    parts.push_back(absl::StrFormat("rank%s %s: %s", ranks.size() > 1 ? "s" : "",
                                    FormatRanks(ranks), Describe(id)));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::Status AgreeAcrossRanks(Communicator& world, const absl::Status& mine,
                              absl::string_view what) {
  return FailureVerdict(GatherRows(world, {mine.ok() ? 0.0 : 1.0}), 1, mine, what);
}

absl::Status AgreeOnLoadedCheckpoint(Communicator& world,
                                     const absl::StatusOr<LoadedCheckpointId>& mine,
                                     absl::string_view load_dir) {
  // A failed rank sends a row too: every rank takes part in the same collective.
  const LoadedCheckpointId id = mine.ok() ? *mine : LoadedCheckpointId{};
  const std::vector<double> row = {mine.ok() ? 0.0 : 1.0, id.iteration.has_value() ? 1.0 : 0.0,
                                   double(id.iteration.value_or(0)), double(id.consumed_samples)};
  const absl::StatusOr<std::vector<double>> table = GatherRows(world, row);
  RETURN_IF_ERROR(FailureVerdict(table, row.size(), mine.status(), "load --load"));
  std::vector<LoadedCheckpointId> loaded(world.size());
  for (int r = 0; r < world.size(); ++r) {
    const double* other = table->data() + r * row.size();
    if (other[1] != 0.0) loaded[r].iteration = int64_t(other[2]);
    loaded[r].consumed_samples = int64_t(other[3]);
  }
  if (std::all_of(loaded.begin(), loaded.end(),
                  [&](const LoadedCheckpointId& l) { return l == loaded[0]; })) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "stopping before training: the ranks loaded different checkpoints (%s), and would train "
      "apart from there; nothing was trained or changed. Every rank must see the same --load "
      "folder (%s): put it on storage that every node shares, or copy the same checkpoint "
      "into each node's folder, and check that no node sees a stale copy",
      DescribeGroups(loaded),
      load_dir.empty() ? std::string("this rank has no --load")
                       : absl::StrCat("this rank's is ", load_dir)));
}

}  // namespace conveyor
