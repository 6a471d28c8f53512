#include "trainer/planning/pipeline_report.h"

#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "parallel/pipeline/bubble.h"
#include "parallel/pipeline/chrome_trace.h"
#include "parallel/string_gather.h"
#include "trainer/reporting/line_file.h"

namespace conveyor {

absl::StatusOr<pipeline::Costs> ParsePipelineCosts(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  double values[3];
  bool ok = parts.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = absl::SimpleAtod(parts[i], &values[i]) && values[i] > 0;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--pipeline-costs '%s': expected three positive numbers F,B,W such as 1,1,1 or 1,2,1",
        text));
  }
  pipeline::Costs costs;
  costs.forward = values[0];
  costs.backward_input = values[1];
  costs.backward_weight = values[2];
  return costs;
}

absl::StatusOr<BubblePrediction> PredictBubble(const ResolvedConfig& resolved) {
  const ParallelConfig& p = resolved.config().parallel();
  const int P = resolved.pp();
  const int V = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  const int M = resolved.micro_batches();
  ASSIGN_OR_RETURN(const pipeline::Costs costs, ParsePipelineCosts(p.pipeline_costs()));
  BubblePrediction prediction;
  prediction.simulated_micro_batches = pipeline::SimulatedMicroBatches(P, M);
  ASSIGN_OR_RETURN(const pipeline::Plan plan,
                   pipeline::MakePlan(p.pipeline_schedule(), P, V,
                                      prediction.simulated_micro_batches));
  ASSIGN_OR_RETURN(prediction.formula, pipeline::PredictedBubble(p.pipeline_schedule(), P, V, M));
  ASSIGN_OR_RETURN(prediction.simulation, pipeline::Simulate(plan, costs));
  prediction.simulated = prediction.simulation.bubble_fraction;
  return prediction;
}

absl::StatusOr<std::vector<RankMemory>> PredictRunMemory(const ResolvedConfig& resolved,
                                                         const BubblePrediction& prediction) {
  const MemoryInputs inputs = MemoryInputsOf(resolved);
  ASSIGN_OR_RETURN(std::vector<RankMemory> memory,
                   PredictMemory(inputs, resolved.model_shape(), prediction.simulation.timeline));
  RETURN_IF_ERROR(ExtendToMicroBatches(inputs, prediction.simulated_micro_batches, &memory));
  return memory;
}

void BubbleMeter::AddStep(const std::vector<pipeline::TimedAction>& step, double step_seconds) {
  for (const pipeline::TimedAction& t : step) {
    if (pipeline::IsCompute(t.action)) busy_ += t.end - t.start;
  }
  wall_ += step_seconds;
}

absl::StatusOr<std::string> BubbleLine(const BubblePrediction& prediction, double measured,
                                       Communicator& pp, std::vector<double>* all_measured) {
  const float mine = static_cast<float>(measured);
  std::vector<float> all(pp.size());
  RETURN_IF_ERROR(pp.AllGather(&mine, 1, all.data()));
  std::string line = absl::StrFormat(
      "    pipeline bubble (%%): predicted %.1f (formula), %.1f (simulated) | measured per "
      "pipeline rank:",
      100 * prediction.formula, 100 * prediction.simulated);
  for (float f : all) absl::StrAppendFormat(&line, " %.1f", 100 * f);
  if (all_measured != nullptr) all_measured->assign(all.begin(), all.end());
  return line;
}

absl::Status WriteMergedTrace(const std::string& path,
                              const std::vector<pipeline::TimedAction>& timeline,
                              Communicator& world) {
  std::ostringstream mine;
  for (const pipeline::TimedAction& t : timeline) {
    mine << static_cast<int>(t.action.type) << " " << t.action.micro_batch << " "
         << t.action.chunk << " " << t.action.peer << " "
         << absl::StrFormat("%.9f %.9f", t.start, t.end) << "\n";
  }
  // Over the world group, so that ranks on nodes that share no folder are merged too.
  ASSIGN_OR_RETURN(const std::vector<std::string> parts,
                   GatherStringsToRoot(world, mine.str(), /*root=*/0));
  if (world.rank() != 0) return absl::OkStatus();
  pipeline::Timeline merged;
  merged.ranks.resize(world.size());
  for (int r = 0; r < world.size(); ++r) {
    std::istringstream part(parts[r]);
    int type;
    pipeline::TimedAction t;
    while (part >> type >> t.action.micro_batch >> t.action.chunk >> t.action.peer >> t.start >>
           t.end) {
      t.action.type = static_cast<pipeline::ActionType>(type);
      merged.ranks[r].push_back(t);
    }
  }
  // Checked to the close, with the errno text (base/atomic_file.h).
  RETURN_IF_ERROR(OutputWriteFailure(
      WriteFile(path, pipeline::ChromeTraceJson(merged, 1e6), Durability::kVisible)))
      << "--trace-file";
  return absl::OkStatus();
}

}  // namespace conveyor
