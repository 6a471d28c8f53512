#include "parallel/rank_environment.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::StatusOr<std::optional<RankEnvironment>> Parse(
    const std::map<std::string, std::string>& vars) {
  return RankEnvironmentFromEnv([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnvironmentTest, NothingSetIsOneProcess) {
  auto env = Parse({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->has_value());
}

TEST(RankEnvironmentTest, Torchrun) {
  auto env = Parse({{"RANK", "3"},
                    {"WORLD_SIZE", "8"},
                    {"LOCAL_RANK", "1"},
                    {"MASTER_ADDR", "node0"},
                    {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.ok()) << env.status();
  ASSERT_TRUE(env->has_value());
  const RankEnvironment& e = **env;
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.run_dir, "");
  EXPECT_EQ(e.store_port, 29500);
  EXPECT_EQ(DescribeRankEnvironment(e),
            "rank 3 of 8 (local rank 1), master node0:29500, TCP store port 29500");
}

TEST(RankEnvironmentTest, StorePortMovesTheTcpStoreOffMasterPort) {
  std::map<std::string, std::string> vars = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}};
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->store_port, 29500);
  vars["CONVEYOR_STORE_PORT"] = "29501";  // torchrun's own store holds MASTER_PORT
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->master_port, 29500);
  EXPECT_EQ((*env)->store_port, 29501);
  EXPECT_EQ(DescribeRankEnvironment(**env),
            "rank 0 of 2 (local rank 0), master node0:29500, TCP store port 29501");
  vars["CONVEYOR_STORE_PORT"] = "0";
  EXPECT_THAT(Parse(vars).status().message(), HasSubstr("CONVEYOR_STORE_PORT=0 is out of range"));
}

TEST(RankEnvironmentTest, SlurmWithRunDir) {
  auto env = Parse({{"SLURM_PROCID", "5"},
                    {"SLURM_NTASKS", "6"},
                    {"SLURM_LOCALID", "2"},
                    {"CONVEYOR_RUN_DIR", "/shared/run1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  ASSERT_TRUE(env->has_value());
  EXPECT_EQ((*env)->rank, 5);
  EXPECT_EQ((*env)->world_size, 6);
  EXPECT_EQ((*env)->local_rank, 2);
  EXPECT_EQ((*env)->run_dir, "/shared/run1");
}

TEST(RankEnvironmentTest, TorchrunWinsOverSlurm) {
  auto env = Parse({{"RANK", "1"},
                    {"WORLD_SIZE", "2"},
                    {"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "1"},
                    {"CONVEYOR_RUN_DIR", "/r"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->rank, 1);
  EXPECT_EQ((*env)->world_size, 2);
}

// The job's identity, which keeps two jobs' ranks apart at the rendezvous: the first
// launcher variable that names one.
TEST(RankEnvironmentTest, TheJobIsNamedByItsLauncher) {
  std::map<std::string, std::string> vars = {
      {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"CONVEYOR_RUN_DIR", "/r"}};
  EXPECT_EQ((*Parse(vars))->job_id, "");
  vars["SLURM_JOB_ID"] = "4711";
  EXPECT_EQ((*Parse(vars))->job_id, "SLURM_JOB_ID=4711");
  EXPECT_EQ(DescribeRankEnvironment(**Parse(vars)),
            "rank 1 of 2 (local rank 0), rendezvous in /r, job SLURM_JOB_ID=4711");
  vars["TORCHELASTIC_RUN_ID"] = "none";  // torchrun's default --rdzv-id names no job
  EXPECT_EQ((*Parse(vars))->job_id, "SLURM_JOB_ID=4711");
  vars["TORCHELASTIC_RUN_ID"] = "run-3";
  EXPECT_EQ((*Parse(vars))->job_id, "TORCHELASTIC_RUN_ID=run-3");
  vars["CONVEYOR_JOB_ID"] = "mine";
  EXPECT_EQ((*Parse(vars))->job_id, "CONVEYOR_JOB_ID=mine");
}

TEST(RankEnvironmentTest, TheRanksOnANodeAreCountedAsTheLauncherSays) {
  std::map<std::string, std::string> vars = {
      {"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"CONVEYOR_RUN_DIR", "/r"}};
  EXPECT_EQ((*Parse(vars))->local_world_size, 0);
  vars["LOCAL_WORLD_SIZE"] = "4";
  EXPECT_EQ((*Parse(vars))->local_world_size, 4);
  vars["LOCAL_WORLD_SIZE"] = "four";
  EXPECT_THAT(Parse(vars).status().message(),
              HasSubstr("LOCAL_WORLD_SIZE=\"four\" is not an integer"));
  const std::map<std::string, std::string> slurm = {{"SLURM_PROCID", "3"},
                                                    {"SLURM_NTASKS", "8"},
                                                    {"SLURM_NTASKS_PER_NODE", "2"},
                                                    {"CONVEYOR_RUN_DIR", "/r"}};
  EXPECT_EQ((*Parse(slurm))->local_world_size, 2);
}

TEST(RankEnvironmentTest, GlooBindsTheInterfaceNamedAsInPyTorch) {
  std::map<std::string, std::string> vars = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"CONVEYOR_RUN_DIR", "/r"}};
  EXPECT_EQ((*Parse(vars))->gloo_interface, "");
  vars["GLOO_SOCKET_IFNAME"] = "ib0";
  EXPECT_EQ((*Parse(vars))->gloo_interface, "ib0");
}

TEST(RankEnvironmentTest, ErrorsNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string expected;
  };
  const Case cases[] = {
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK=\"x\" is not an integer"},
      {{{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"CONVEYOR_RUN_DIR", "/r"}},
       "RANK=2 must be less than WORLD_SIZE=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 is out of range"},
      {{{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_LOCALID", "-1"},
        {"CONVEYOR_RUN_DIR", "/r"}},
       "SLURM_LOCALID=-1 is out of range"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}},
       "MASTER_PORT=70000 is out of range"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "set CONVEYOR_RUN_DIR"},
  };
  for (const Case& c : cases) {
    auto env = Parse(c.vars);
    ASSERT_FALSE(env.ok()) << c.expected;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(env.status().message(), HasSubstr(c.expected));
  }
}

TEST(RankEnvironmentTest, OneRankNeedsNoRendezvous) {
  auto env = Parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->world_size, 1);
}

absl::Status Agreement(int nproc_per_node, const std::map<std::string, std::string>& vars) {
  return CheckLauncherAgreement(nproc_per_node, 1, [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LauncherAgreementTest, AnExternalLaunchOfSeveralRanksAndNprocPerNodeContradict) {
  const absl::Status torchrun = Agreement(4, {{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(torchrun.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(torchrun.message(),
              AllOf(HasSubstr("RANK=0 and WORLD_SIZE=2"), HasSubstr("--nproc-per-node 4"),
                    HasSubstr("drop --nproc-per-node"), HasSubstr("unset RANK and WORLD_SIZE")));
  // Even when the sizes agree: this process is one rank of another launcher's job.
  EXPECT_FALSE(Agreement(2, {{"RANK", "1"}, {"WORLD_SIZE", "2"}}).ok());
  const absl::Status slurm = Agreement(4, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}});
  EXPECT_THAT(slurm.message(), AllOf(HasSubstr("SLURM_PROCID=0 and SLURM_NTASKS=8"),
                                     HasSubstr("unset SLURM_PROCID and SLURM_NTASKS")));
  // A world size without a rank that differs from the ranks the flag forks.
  EXPECT_THAT(Agreement(4, {{"WORLD_SIZE", "2"}}).message(),
              AllOf(HasSubstr("WORLD_SIZE=2 in the environment"), HasSubstr("unset WORLD_SIZE")));
  EXPECT_THAT(Agreement(4, {{"SLURM_NTASKS", "3"}}).message(), HasSubstr("SLURM_NTASKS=3"));
}

TEST(LauncherAgreementTest, WhatRunsTodayStillRuns) {
  EXPECT_TRUE(Agreement(1, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}).ok());  // torchrun
  EXPECT_TRUE(Agreement(4, {}).ok());                                    // built-in launcher
  // srun -n1 trainer --nproc-per-node 4: Slurm counts one task.
  EXPECT_TRUE(Agreement(4, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).ok());
  EXPECT_TRUE(Agreement(4, {{"RANK", "0"}, {"WORLD_SIZE", "1"}}).ok());
  // An allocation sized for the built-in launcher (salloc -n 4), no rank given.
  EXPECT_TRUE(Agreement(4, {{"SLURM_NTASKS", "4"}}).ok());
  EXPECT_TRUE(Agreement(4, {{"WORLD_SIZE", "4"}}).ok());
  EXPECT_TRUE(Agreement(4, {{"WORLD_SIZE", "not a number"}}).ok());
}

}  // namespace
}  // namespace conveyor
