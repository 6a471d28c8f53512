#include "trainer/planning/plan_html.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "model/memory_model.h"
#include "parallel/pipeline/gantt.h"
#include "trainer/planning/flops.h"
#include "trainer/planning/pipeline_report.h"
#include "trainer/planning/plan_page.h"

namespace conveyor {
namespace {

// A JSON string; the page embeds the JSON in a <script> element, so "</" is written
// "<\/" (the same string to a JSON parser) lest it close the element.
std::string JsonString(absl::string_view s) {
  return absl::StrCat(
      "\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"</", "<\\/"}}), "\"");
}

// What the Gantt chart colours an action by: F, B (input gradient, or the fused
// backward of schedules without a split), W.
const char* Kind(pipeline::ActionType type) {
  switch (type) {
    case pipeline::ActionType::kForward:
      return "F";
    case pipeline::ActionType::kBackwardWeight:
      return "W";
    default:
      return "B";
  }
}

std::string TimelineJson(const pipeline::Timeline& timeline) {
  const pipeline::TimelineUsage usage = pipeline::MeasureUsage(timeline);
  std::vector<std::string> ranks;
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    std::vector<std::string> actions;
    for (const pipeline::TimedAction& t : timeline.ranks[r]) {
      if (!pipeline::IsCompute(t.action)) continue;
      actions.push_back(absl::StrFormat(
          "{\"kind\": \"%s\", \"label\": %s, \"micro_batch\": %d, \"chunk\": %d, "
          "\"start\": %.9g, \"end\": %.9g}",
          Kind(t.action.type), JsonString(pipeline::GanttLabel(t.action)), t.action.micro_batch,
          t.action.chunk, t.start - usage.begin, t.end - usage.begin));
    }
    ranks.push_back(absl::StrFormat("{\"bubble\": %.9g, \"actions\": [%s]}",
                                    usage.ranks[r].bubble_fraction, absl::StrJoin(actions, ", ")));
  }
  return absl::StrCat("[", absl::StrJoin(ranks, ",\n    "), "]");
}

std::string MemoryJson(const std::vector<RankMemory>& memory) {
  std::vector<std::string> rows;
  for (const RankMemory& m : memory) {
    rows.push_back(absl::StrFormat(
        "{\"pipeline_rank\": %d, \"parameters\": %d, \"weight_bytes\": %d, \"grad_bytes\": %d, "
        "\"optimizer_bytes\": %d, \"peak_stashed\": %d, \"stash_bytes_per_micro_batch\": %d, "
        "\"activation_bytes\": %d, \"total_bytes\": %d}",
        m.pipeline_rank, m.parameters, m.weight_bytes, m.grad_bytes, m.optimizer_bytes,
        m.peak_stashed, m.stash_bytes_per_micro_batch, m.activation_peak_bytes, m.total_bytes()));
  }
  return absl::StrCat("[", absl::StrJoin(rows, ",\n    "), "]");
}

// The page's data: the figures of the --dry-run text.
absl::StatusOr<std::string> PlanJson(const ResolvedConfig& resolved, const ModelShape& shape) {
  const Config& config = resolved.config();
  const ParallelConfig& p = config.parallel();
  const TrainingConfig& t = config.training();
  ASSIGN_OR_RETURN(const BubblePrediction bubble, PredictBubble(resolved));
  ASSIGN_OR_RETURN(const std::vector<RankMemory> memory,
                   PredictRunMemory(resolved, bubble));
  const std::string backend = absl::StrCat(resolved.on_gpu() ? "CUDA" : "CPU", " backend, ",
                                           config.precision().bf16() ? "bf16" : "fp32");
  return absl::StrFormat(
      "{\n  \"batch\": {\"global_batch_size\": %d, \"micro_batches\": %d, \"data_parallel\": %d, "
      "\"micro_batch_size\": %d, \"seq_length\": %d, \"tokens_per_step\": %d, "
      "\"tflop_per_iteration\": %.9g, \"padded_vocab\": %d},\n"
      "  \"layout\": {\"world_size\": %d, \"tensor_parallel\": %d, \"context_parallel\": %d, "
      "\"pipeline_parallel\": %d, \"data_parallel\": %d, \"virtual_stages\": %d},\n"
      "  \"schedule\": {\"name\": %s, \"costs\": %s, \"bubble_formula\": %.9g, "
      "\"bubble_simulated\": %.9g, \"makespan\": %.9g},\n"
      "  \"backend\": %s,\n"
      "  \"timeline\": %s,\n"
      "  \"memory\": %s\n}",
      t.global_batch_size(), resolved.micro_batches(), resolved.dp(), t.micro_batch_size(),
      shape.seq, int64_t{t.global_batch_size()} * shape.seq,
      MegatronFlopsPerIteration(shape, t.global_batch_size()) / 1e12, shape.padded_vocab,
      resolved.world_size(), resolved.tp(), resolved.cp(), resolved.pp(), resolved.dp(),
      resolved.virtual_stages(),
      JsonString(p.pipeline_schedule()), JsonString(p.pipeline_costs()), bubble.formula,
      bubble.simulated, bubble.simulation.makespan, JsonString(backend),
      TimelineJson(bubble.simulation.timeline), MemoryJson(memory));
}

}  // namespace

absl::StatusOr<std::string> PlanHtml(const ResolvedConfig& resolved) {
  ASSIGN_OR_RETURN(const std::string json, PlanJson(resolved, resolved.model_shape()));
  return absl::StrReplaceAll(kPlanPage, {{"/*PLAN_DATA*/", json}});
}

}  // namespace conveyor
