#include "trainer/checkpoint/load_agreement.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/exit_code.h"
#include "base/status_macros.h"
#include "parallel/group.h"
#include "trainer/checkpoint/envelope.h"
#include "trainer/checkpoint/format.h"

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

// The first element of a rank's row: 0 where it succeeded, else the exit code of its
// error (base/exit_code.h), so that the others stop with the same kind of error.
double FailureCell(const absl::Status& mine) { return double(ExitCodeFor(mine)); }

// The verdict on failures, once `table` (rows of `width`, the first element of each
// FailureCell) is gathered: this rank's own error first, so that its message is the
// one it reports. The others' is a refusal of input (exit 2) when a failed rank's was,
// so that every process of the job exits alike, whichever the launcher sees first.
absl::Status FailureVerdict(const absl::StatusOr<std::vector<double>>& table, size_t width,
                            const absl::Status& mine, absl::string_view what) {
  if (!mine.ok()) return mine;
  RETURN_IF_ERROR(table.status());
  std::vector<int> failed;
  bool refused = false;
  for (size_t r = 0; r * width < table->size(); ++r) {
    const double cell = (*table)[r * width];
    if (cell == 0.0) continue;
    failed.push_back(int(r));
    refused = refused || cell == double(kExitUsage);
  }
  if (failed.empty()) return absl::OkStatus();
  const std::string message =
      absl::StrFormat("stopping before training: rank(s) %s could not %s (their errors say why)",
                      FormatRanks(failed), what);
  return refused ? absl::FailedPreconditionError(message) : absl::AbortedError(message);
}

// The checkpoint a rank loaded, with its manifest's checksum: two runs' checkpoints of
// one iteration hold the same iteration and sample count, but never the same manifest
// (it holds every shard's CRC32C).
struct CheckpointSeen {
  LoadedCheckpointId id;
  std::optional<uint32_t> manifest_crc32c;  // nullopt: no checkpoint, or unreadable

  bool operator==(const CheckpointSeen& o) const {
    return id == o.id && manifest_crc32c == o.manifest_crc32c;
  }
};

// The CRC32C that <load_dir>/iter_NNNNNNN/manifest.pb's envelope records for its
// payload (bytes 8-11, envelope.h), which OpenCheckpoint checked when it loaded it:
// 24 bytes read again, not the manifest.
std::optional<uint32_t> ManifestCrc32c(absl::string_view load_dir, int64_t iteration) {
  const std::string path =
      absl::StrCat(load_dir, "/", IterationDirName(iteration), "/", kManifestFileName);
  char header[kEnvelopeHeaderBytes];
  std::ifstream file(path, std::ios::binary);
  if (!file.read(header, sizeof(header)) ||
      std::memcmp(header, kEnvelopeMagic, sizeof(kEnvelopeMagic) - 1) != 0) {
    return std::nullopt;
  }
  uint32_t crc = 0;
  std::memcpy(&crc, header + 8, sizeof(crc));  // little-endian, as x86-64
  return crc;
}

std::string Describe(const CheckpointSeen& loaded, bool with_checksum) {
  const LoadedCheckpointId& id = loaded.id;
  if (!id.iteration.has_value()) return "no checkpoint (starting from iteration 0)";
  std::string checksum;
  if (with_checksum) {
    checksum = loaded.manifest_crc32c.has_value()
                   ? absl::StrFormat(", manifest CRC32C %08x", *loaded.manifest_crc32c)
                   : ", manifest unreadable";
  }
  return absl::StrFormat("iteration %d (%d samples consumed%s)", *id.iteration, id.consumed_samples,
                         checksum);
}

// "rank 0: iteration 20 (160 samples consumed); ranks 1-3: no checkpoint (...)": one
// entry per distinct checkpoint, in the order of each one's first rank; with the
// manifests' checksums when two checkpoints differ in nothing else.
std::string DescribeGroups(const std::vector<CheckpointSeen>& loaded) {
  std::vector<std::pair<CheckpointSeen, std::vector<int>>> groups;
  for (int r = 0; r < int(loaded.size()); ++r) {
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == loaded[r]; });
    if (same == groups.end()) same = groups.insert(groups.end(), {loaded[r], {}});
    same->second.push_back(r);
  }
  bool with_checksum = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    for (size_t j = 0; j < i; ++j) with_checksum |= groups[i].first.id == groups[j].first.id;
  }
  std::vector<std::string> parts;
  for (const auto& [checkpoint, ranks] : groups) {
    parts.push_back(absl::StrFormat("rank%s %s: %s", ranks.size() > 1 ? "s" : "",
                                    FormatRanks(ranks), Describe(checkpoint, with_checksum)));
  }
  return absl::StrJoin(parts, "; ");
}

// "this rank's is ckpt (it loaded ckpt/iter_0000020/manifest.pb)": the folder and the
// file to compare across nodes.
std::string DescribeLoadDir(absl::string_view load_dir, const LoadedCheckpointId& id) {
  if (load_dir.empty()) return "this rank has no --load";
  if (!id.iteration.has_value()) return absl::StrCat("this rank's is ", load_dir);
  return absl::StrCat("this rank's is ", load_dir, " (it loaded ", load_dir, "/",
                      IterationDirName(*id.iteration), "/", kManifestFileName, ")");
}

}  // namespace

absl::Status AgreeAcrossRanks(Communicator& world, const absl::Status& mine,
                              absl::string_view what) {
  return FailureVerdict(GatherRows(world, {FailureCell(mine)}), 1, mine, what);
}

absl::Status AgreeOnLoadedCheckpoint(Communicator& world,
                                     const absl::StatusOr<LoadedCheckpointId>& mine,
                                     absl::string_view load_dir) {
  // A failed rank sends a row too: every rank takes part in the same collective.
  const LoadedCheckpointId id = mine.ok() ? *mine : LoadedCheckpointId{};
  const std::optional<uint32_t> crc =
      id.iteration.has_value() ? ManifestCrc32c(load_dir, *id.iteration) : std::nullopt;
  // Every value is an integer below 2^53: exact in a double.
  const std::vector<double> row = {
      FailureCell(mine.status()),       id.iteration.has_value() ? 1.0 : 0.0,
      double(id.iteration.value_or(0)), double(id.consumed_samples),
      crc.has_value() ? 1.0 : 0.0,      double(crc.value_or(0))};
  const absl::StatusOr<std::vector<double>> table = GatherRows(world, row);
  RETURN_IF_ERROR(FailureVerdict(table, row.size(), mine.status(), "load --load"));
  std::vector<CheckpointSeen> loaded(world.size());
  for (int r = 0; r < world.size(); ++r) {
    const double* other = table->data() + r * row.size();
    if (other[1] != 0.0) loaded[r].id.iteration = int64_t(other[2]);
    loaded[r].id.consumed_samples = int64_t(other[3]);
    if (other[4] != 0.0) loaded[r].manifest_crc32c = uint32_t(other[5]);
  }
  if (std::all_of(loaded.begin(), loaded.end(),
                  [&](const CheckpointSeen& l) { return l == loaded[0]; })) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "stopping before training: the ranks loaded different checkpoints (%s), and would train "
      "apart from there; nothing was trained or changed. Every rank must see the same --load "
      "folder (%s): put it on storage that every node shares, or copy the same checkpoint "
      "into each node's folder, and check that no node sees a stale copy",
      DescribeGroups(loaded), DescribeLoadDir(load_dir, id)));
}

}  // namespace conveyor
