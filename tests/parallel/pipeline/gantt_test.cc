#include "parallel/pipeline/gantt.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "parallel/pipeline/chrome_trace.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"

namespace conveyor {
namespace pipeline {
namespace {

Timeline Simulated(absl::string_view name, int P, int V, int M, Costs costs = Costs()) {
  absl::StatusOr<SimulationResult> r = Simulate(*MakePlan(name, P, V, M), costs);
  EXPECT_TRUE(r.ok()) << r.status();
  return r->timeline;
}

TEST(GanttTest, GpipeFourStagesFourMicroBatches) {
  // GPipe with P=4, M=4 (docs/design.md §10), one slice per forward or backward, counted
  // from 0. Stage 0's backwards wait for the gradient to come back from the last stage,
  // so the chart is 2(M+P-1) = 14 slices wide.
  Costs fused_backward;
  fused_backward.backward_weight = 0;
  EXPECT_EQ(GanttChart(Simulated("gpipe", 4, 1, 4, fused_backward)),
            "t       0  1  2  3  4  5  6  7  8  9  10 11 12 13\n"
            "rank 0  F0 F1 F2 F3 .  .  .  .  .  .  B3 B2 B1 B0\n"
            "rank 1  .  F0 F1 F2 F3 .  .  .  .  B3 B2 B1 B0 .\n"
            "rank 2  .  .  F0 F1 F2 F3 .  .  B3 B2 B1 B0 .  .\n"
            "rank 3  .  .  .  F0 F1 F2 F3 B3 B2 B1 B0 .  .  .\n");
}

TEST(GanttTest, OneFOneBWithTwoUnitBackwards) {
  EXPECT_EQ(GanttChart(Simulated("1f1b", 4, 1, 4)),
            "t       0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16 17 18 19 20\n"
            "rank 0  F0 F1 F2 F3 .  .  .  .  .  .  B0 B0 .  B1 B1 .  B2 B2 .  B3 B3\n"
            "rank 1  .  F0 F1 F2 .  .  .  .  B0 B0 F3 B1 B1 .  B2 B2 .  B3 B3 .  .\n"
            "rank 2  .  .  F0 F1 .  .  B0 B0 F2 B1 B1 F3 B2 B2 .  B3 B3 .  .  .  .\n"
            "rank 3  .  .  .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .  .  .  .  .  .\n");
}

TEST(GanttTest, InterleavedCellsWidenForChunks) {
  Costs fused_backward;
  fused_backward.backward_weight = 0;
  const std::string chart = GanttChart(Simulated("interleaved-1f1b", 2, 2, 4, fused_backward));
  EXPECT_EQ(std::string(absl::StrSplit(chart, '\n').begin()->data(), 20), "t       0    1    2 ");
  EXPECT_TRUE(absl::StrContains(chart, "rank 0  F0   F1   F0c1 F1c1 F2   B0c1"));
}

TEST(GanttTest, ChromeTraceHasOneEventPerActionAndNamesPerRank) {
  const Timeline timeline = Simulated("1f1b", 2, 1, 1);
  const std::string json = ChromeTraceJson(timeline);
  EXPECT_TRUE(absl::StartsWith(json, "{\"traceEvents\":["));
  EXPECT_TRUE(absl::EndsWith(json, "],\"displayTimeUnit\":\"ms\"}\n"));
  auto count = [&json](const std::string& needle) {
    int n = 0;
    for (size_t at = json.find(needle); at != std::string::npos; at = json.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  // Rank 0: F0 sF0>1 rB0<1 BW0; rank 1: rF0<0 F0 BW0 sB0>0.
  EXPECT_EQ(count("\"ph\":\"X\""), 8);
  EXPECT_EQ(count("\"ph\":\"M\""), 6);
  EXPECT_EQ(count("{"), count("}"));
  EXPECT_EQ(count("\"cat\":\"p2p\""), 4);
  // BW0 on rank 0 runs [4, 6) units; one unit shows as one second.
  EXPECT_TRUE(absl::StrContains(
      json, R"({"name":"BW0","cat":"compute","ph":"X","pid":0,"tid":0,"ts":4000000.000,)"
            R"("dur":2000000.000,"args":{"micro_batch":0,"chunk":0}})"));
}

}  // namespace
}  // namespace pipeline
}  // namespace conveyor
