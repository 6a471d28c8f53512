// The pipeline rehearsal runs on real ranks: each rank must run exactly its schedule's
// actions, in the schedule's order, for every schedule. (How close the measured
// makespan comes to the simulated one is a benchmark, tools/bench_pipeline.sh.)
#include "trainer/planning/rehearsal.h"

#include <sstream>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "parallel/launcher.h"
#include "parallel/pipeline/schedule.h"
#include "trainer/config/config_validation.h"

namespace conveyor {
namespace {

struct Case {
  std::string schedule;
  int chunks;
};

class RehearsalTest : public ::testing::TestWithParam<Case> {};

TEST_P(RehearsalTest, EachRankRunsItsScheduleInOrder) {
  constexpr int kRanks = 4;
  Config c;
  c.mutable_model()->set_num_layers(8);
  c.mutable_model()->set_vocab_size(64);
  c.mutable_model()->set_seq_length(8);
  c.mutable_model()->set_hidden_size(16);
  c.mutable_training()->set_num_micro_batches(8);
  c.mutable_training()->set_train_iters(2);
  c.mutable_data()->set_mock_data(true);
  c.mutable_parallel()->set_nproc_per_node(kRanks);
  c.mutable_parallel()->set_pipeline_model_parallel_size(kRanks);
  c.mutable_parallel()->set_pipeline_schedule(GetParam().schedule);
  c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(GetParam().chunks);
  c.mutable_parallel()->set_pipeline_rehearsal_ms(1);
  absl::StatusOr<ResolvedConfig> config = ResolvedConfig::Resolve(c, kRanks);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<pipeline::Plan> plan =
      pipeline::MakePlan(GetParam().schedule, kRanks, GetParam().chunks, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();

  std::ostringstream errors;
  const int code = LaunchLocalRanks(
      kRanks,
      [&](const RankEnvironment& env) {
        absl::StatusOr<std::unique_ptr<ParallelState>> state =
            ParallelState::Create(env, *ResolveLayout(1, kRanks, kRanks), absl::Seconds(60));
        if (!state.ok()) return 1;
        absl::StatusOr<RehearsalResult> r = RunRehearsal(*config, **state, nullptr);
        if (!r.ok()) return 2;
        const std::vector<pipeline::Action>& want = plan->ranks[env.rank];
        if (r->last_step.size() != want.size()) return 3;
        for (size_t i = 0; i < want.size(); ++i) {
          if (r->last_step[i].action != want[i]) return 4;
          if (r->last_step[i].end < r->last_step[i].start) return 5;
        }
        return 0;
      },
      errors);
  EXPECT_EQ(code, 0) << "1 = groups, 2 = rehearsal, 3 = action count, 4 = order, 5 = times; "
                     << errors.str();
}

INSTANTIATE_TEST_SUITE_P(Schedules, RehearsalTest,
                         ::testing::Values(Case{"gpipe", 1}, Case{"1f1b", 1},
                                           Case{"interleaved-1f1b", 2}, Case{"zb-h1", 1},
                                           Case{"zb-h2", 1}, Case{"zbv", 2}),
                         [](const ::testing::TestParamInfo<Case>& test) {
                           std::string name = test.param.schedule;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace conveyor
