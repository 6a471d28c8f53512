#include "trainer/host_memory_fit.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/memory_model.h"
#include "runtime/device_memory.h"
#include "trainer/pipeline_report.h"

namespace conveyor {
namespace {

std::string RanksDescription(const RanksOnHost& ranks) {
  return ranks.count == 1 ? "this rank"
                          : absl::StrFormat("the %d ranks on this machine", ranks.count);
}

}  // namespace

absl::StatusOr<int64_t> PredictedHostBytes(const ResolvedConfig& resolved, const ModelShape& shape,
                                           const RanksOnHost& ranks) {
  const Config& config = resolved.config();
  const int world_size = resolved.world_size();
  ASSIGN_OR_RETURN(const BubblePrediction bubble, PredictBubble(config));
  ASSIGN_OR_RETURN(const std::vector<RankMemory> per_stage,
                   PredictRunMemory(config, shape, bubble, resolved.dp()));
  // Megatron's order puts the pipeline rank slowest: global rank r is on stage
  // r / (TP x DP), and every rank of a stage holds what its TP rank 0, DP rank 0 holds.
  const int ranks_per_stage = world_size / resolved.pp();
  int64_t total = 0;
  const int end = std::min(world_size, ranks.first_rank + ranks.count);
  for (int r = std::max(0, ranks.first_rank); r < end; ++r) {
    total += per_stage[r / ranks_per_stage].total_bytes();
  }
  return total;
}

std::string HostMemoryLine(const ResolvedConfig& resolved, const ModelShape& shape,
                           const RanksOnHost& ranks, const HostMemoryLimit& limit) {
  if (resolved.on_gpu()) return "";
  const absl::StatusOr<int64_t> predicted = PredictedHostBytes(resolved, shape, ranks);
  if (!predicted.ok()) return "";  // the plan above has reported the same error
  return absl::StrFormat("plan: host memory of %s: %s predicted, %s usable (%s)\n",
                         RanksDescription(ranks), FormatMemorySize(*predicted),
                         FormatMemorySize(limit.bytes), limit.source);
}

absl::Status CheckRunFitsHostMemory(const ResolvedConfig& resolved, const ModelShape& shape,
                                    const RanksOnHost& ranks, const HostMemoryLimit& limit) {
  if (resolved.on_gpu()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int64_t predicted, PredictedHostBytes(resolved, shape, ranks));
  if (predicted <= limit.bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s %s predicted to need %s of host memory at the peak (the memory model, as --dry-run "
      "prints it per rank), but this process may use %s (%s), so the kernel would kill the run "
      "part way; nothing was started. %s",
      RanksDescription(ranks), ranks.count == 1 ? "is" : "are", FormatMemorySize(predicted),
      FormatMemorySize(limit.bytes), limit.source, kOutOfMemoryAdvice));
}

}  // namespace conveyor
