#include "trainer/checkpoint/megatron_folder.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

// The folder a load would look in first: the highest iter_NNNNNNN, else Megatron's
// release folder (its latest file then says "release").
std::optional<std::string> NewestCheckpointFolder(const std::vector<std::string>& names) {
  std::optional<std::string> newest;
  int64_t newest_iteration = -1;
  for (const std::string& name : names) {
    int64_t iteration;
    if (ParseIterationDirName(name, &iteration) && iteration > newest_iteration) {
      newest_iteration = iteration;
      newest = name;
    }
  }
  if (!newest.has_value() && std::find(names.begin(), names.end(), "release") != names.end()) {
    newest = "release";
  }
  return newest;
}

}  // namespace

std::optional<std::string> DescribeMegatronCheckpoint(const std::string& dir,
                                                      const std::vector<std::string>& names) {
  const std::optional<std::string> folder = NewestCheckpointFolder(names);
  if (!folder.has_value()) return std::nullopt;
  const absl::StatusOr<std::vector<std::string>> entries = ListDir(JoinPath(dir, *folder));
  if (!entries.ok()) return std::nullopt;  // the load names what it cannot read
  const auto has = [&](auto&& match) {
    return std::find_if(entries->begin(), entries->end(), match) != entries->end();
  };
  if (has([](const std::string& e) { return e == kManifestFileName; })) return std::nullopt;
  const auto model_rank = std::find_if(entries->begin(), entries->end(), [](const std::string& e) {
    return absl::StartsWith(e, "mp_rank_");
  });
  if (model_rank != entries->end()) {
    return absl::StrCat("Megatron-LM's torch layout: ", *folder, " holds ", *model_rank,
                        "/model_optim_rng.pt");
  }
  const auto shard = std::find_if(entries->begin(), entries->end(), [](const std::string& e) {
    return absl::EndsWith(e, ".distcp");
  });
  if (shard != entries->end() || has([](const std::string& e) { return e == ".metadata"; })) {
    return absl::StrCat("Megatron-LM's torch_dist layout: ", *folder, " holds ",
                        shard != entries->end() ? absl::StrCat(*shard, " and ") : "",
                        ".metadata");
  }
  return std::nullopt;
}

}  // namespace conveyor
