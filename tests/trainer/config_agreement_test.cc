#include "trainer/config/config_agreement.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/in_process_world.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

Config Parse(const std::vector<std::string>& args) {
  absl::StatusOr<Config> config = ParseFlags(args);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// Runs AgreeOnConfig on one thread per rank, rank r with configs[r].
std::vector<absl::Status> Agree(const std::vector<Config>& configs) {
  testing_util::InProcessWorld world(static_cast<int>(configs.size()));
  return world.Run(
      [&](int rank, Communicator& comm) { return AgreeOnConfig(configs[rank], comm); });
}

TEST(ConfigAgreementTest, RanksWithTheSameFlagsAgree) {
  const Config config = Parse({"--mock-data", "--lr", "0.001", "--num-layers", "4"});
  for (const absl::Status& s : Agree({config, config, config})) EXPECT_TRUE(s.ok()) << s;
}

TEST(ConfigAgreementTest, EveryRankNamesEachDifferingFlagAndWhoHoldsWhat) {
  const Config base = Parse({"--mock-data", "--lr", "0.001"});
  const Config other_lr = Parse({"--mock-data", "--lr", "0.002"});
  const Config other_seed_and_batch =
      Parse({"--mock-data", "--lr", "0.001", "--seed", "7", "--micro-batch-size", "4"});
  const std::vector<absl::Status> statuses =
      Agree({base, base, base, other_lr, other_seed_and_batch});
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), AllOf(HasSubstr("the ranks were started with different settings"),
                                   HasSubstr("--micro-batch-size 1 on ranks 0-3, 4 on rank 4"),
                                   HasSubstr("--seed 1234 on ranks 0-3, 7 on rank 4"),
                                   HasSubstr("--lr 0.001 on ranks 0-2, 4, 0.002 on rank 3"),
                                   HasSubstr("Every rank must be given the same flags"),
                                   Not(HasSubstr("--num-layers"))));
  }
  EXPECT_EQ(statuses[0].message(), statuses[4].message());
}

TEST(ConfigAgreementTest, ModelShapeAndLayoutDifferencesAreFound) {
  const Config a = Parse({"--mock-data", "--num-layers", "2", "--tensor-model-parallel-size", "2"});
  const Config b = Parse({"--mock-data", "--num-layers", "3", "--tensor-model-parallel-size", "1"});
  for (const absl::Status& s : Agree({a, b})) {
    EXPECT_THAT(s.message(), AllOf(HasSubstr("--num-layers 2 on rank 0, 3 on rank 1"),
                                   HasSubstr("--tensor-model-parallel-size 2 on rank 0, 1 on "
                                             "rank 1")));
  }
}

TEST(ConfigAgreementTest, ARanksOwnViewOfFilesAndOutputsMayDiffer) {
  // Per-node copies of a checkpoint, and this process's own outputs.
  const Config a = Parse({"--mock-data", "--load", "/node0/ckpt", "--metrics-file", "a.jsonl",
                          "--trace-file", "a.json", "--data-cache-path", "/local0"});
  const Config b = Parse({"--mock-data", "--load", "/node1/ckpt", "--metrics-file", "b.jsonl",
                          "--trace-file", "b.json", "--data-cache-path", "/local1"});
  for (const absl::Status& s : Agree({a, b})) EXPECT_TRUE(s.ok()) << s;
}

TEST(ConfigAgreementTest, ListsAreComparedWhole) {
  const Config a = Parse({"--recompute-modules", "core_attn", "mlp"});
  const Config b = Parse({"--recompute-modules", "core_attn", "layernorm"});
  for (const absl::Status& s : Agree({a, b})) {
    EXPECT_THAT(s.message(), HasSubstr("--recompute-modules [\"core_attn\", \"mlp\"] on rank 0"));
  }
}

// Input files are a rank's own view: a node-local copy at another path is the same
// input (their contents are compared, input_fingerprint.h). Their number and weights
// are settings.
TEST(ConfigAgreementTest, InputFilePathsMayDifferButNotDatasetWeights) {
  const Config a = Parse({"--data-path", "0.5", "/node0/x", "0.5", "/node0/y", "--tokenizer-model",
                          "/node0/tok.model", "--vocab-file", "/node0/v.json", "--merge-file",
                          "/node0/m.txt", "--train-data-path", "/node0/t"});
  const Config b = Parse({"--data-path", "0.5 /node1/x 0.5 /node1/y", "--tokenizer-model",
                          "/node1/tok.model", "--vocab-file", "/node1/v.json", "--merge-file",
                          "/node1/m.txt", "--train-data-path", "/node1/t"});
  for (const absl::Status& s : Agree({a, b})) EXPECT_TRUE(s.ok()) << s;
  const Config other_weights = Parse({"--data-path", "0.3", "/node1/x", "0.7", "/node1/y"});
  const Config one_dataset = Parse({"--data-path", "/node1/x"});
  for (const absl::Status& s : Agree({a, other_weights, one_dataset})) {
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("--data-path 2 datasets, weights [0.5, 0.5] on rank 0, 2 "
                                "datasets, weights [0.3, 0.7] on rank 1, 1 dataset on rank 2"),
                      HasSubstr("--train-data-path 1 dataset on rank 0, [] on ranks 1-2"),
                      Not(HasSubstr("--tokenizer-model"))));
  }
}

TEST(ConfigAgreementTest, SettingsExcludeOnlyPerRankFlags) {
  const Config config = Parse({"--mock-data", "--save", "s", "--load", "l"});
  const std::vector<std::pair<std::string, std::string>> settings = SettingsEveryRankShares(config);
  EXPECT_THAT(settings, ::testing::Contains(Pair("--save", "\"s\"")));
  EXPECT_THAT(settings, ::testing::Not(::testing::Contains(Pair("--load", ::testing::_))));
  EXPECT_EQ(settings.size() + 10, AllFlagFields().size());
}

}  // namespace
}  // namespace conveyor
