#include "trainer/planning/host_memory_fit.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/memory_model.h"
#include "runtime/device_memory.h"
#include "trainer/planning/pipeline_report.h"

namespace conveyor {
namespace {

std::string RanksDescription(const RanksOnHost& ranks) {
  return ranks.count == 1 ? "this rank"
                          : absl::StrFormat("the %d ranks on this machine", ranks.count);
}

}  // namespace

StartupMemory RanksStartupMemory(const ProcessMemory& self, const RanksOnHost& ranks,
                                 bool own_processes, int blas_threads) {
  const int64_t files = std::max<int64_t>(0, self.peak_bytes - self.anonymous_bytes);
  const int processes = own_processes ? ranks.count : 1;
  const int64_t per_rank = kRankPrivateBytes + int64_t{blas_threads} * kBlasBytesPerThread;
  const int64_t bytes = files + processes * self.anonymous_bytes + ranks.count * per_rank;
  return {bytes, absl::StrFormat(
                     "%s before any tensor (the program, its libraries, heaps and buffers: this "
                     "process's peak resident memory, measured, with its heap counted %s, and "
                     "%s a rank for its own BLAS and gloo buffers)",
                     FormatMemorySize(bytes), own_processes ? "once per rank" : "once",
                     FormatMemorySize(per_rank))};
}

absl::StatusOr<int64_t> PredictedHostBytes(const ResolvedConfig& resolved,
                                           const RanksOnHost& ranks) {
  const int world_size = resolved.world_size();
  ASSIGN_OR_RETURN(const BubblePrediction bubble, PredictBubble(resolved));
  ASSIGN_OR_RETURN(const std::vector<RankMemory> per_stage,
                   PredictRunMemory(resolved, bubble));
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

std::string HostMemoryLine(const ResolvedConfig& resolved, const RanksOnHost& ranks,
                           const StartupMemory& startup,
                           const HostMemoryLimit& limit) {
  if (resolved.on_gpu()) return "";
  const absl::StatusOr<int64_t> predicted = PredictedHostBytes(resolved, ranks);
  if (!predicted.ok()) return "";  // the plan above has reported the same error
  return absl::StrFormat(
      "plan: host memory of %s: %s predicted (of which %s before any tensor), %s usable (%s)\n",
      RanksDescription(ranks), FormatMemorySize(*predicted + startup.bytes),
      FormatMemorySize(startup.bytes), FormatMemorySize(limit.bytes), limit.source);
}

absl::Status CheckRunFitsHostMemory(const ResolvedConfig& resolved, const RanksOnHost& ranks,
                                    const StartupMemory& startup,
                                    const HostMemoryLimit& limit) {
  if (resolved.on_gpu()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int64_t predicted, PredictedHostBytes(resolved, ranks));
  if (predicted + startup.bytes <= limit.bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s %s predicted to need %s of host memory at the peak: %s for the model and its "
      "activations (the memory model, as --dry-run prints it per rank) and %s), but this "
      "process may use %s (%s), so the kernel would kill the run part way; nothing was "
      "started. %s",
      RanksDescription(ranks), ranks.count == 1 ? "is" : "are",
      FormatMemorySize(predicted + startup.bytes), FormatMemorySize(predicted), startup.description,
      FormatMemorySize(limit.bytes), limit.source, kOutOfMemoryAdvice));
}

}  // namespace conveyor
