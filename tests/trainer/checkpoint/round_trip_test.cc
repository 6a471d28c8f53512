// One rank saves and loads: values come back bit for bit, the state comes back whole,
// and the latest file and --ckpt-step choose the iteration.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::CountWrong;
using testing_util::EmptyShard;
using testing_util::FilledShard;
using testing_util::FreshDir;
using testing_util::LocalShard;
using testing_util::Refs;

CheckpointState StateAt(int64_t iteration) {
  CheckpointState state;
  state.config.mutable_model()->set_hidden_size(8);
  state.config.mutable_training()->set_seed(99);
  state.iteration = iteration;
  state.consumed_samples = iteration * 16;
  state.data_position.set_train_consumed_samples(iteration * 16);
  state.data_position.set_valid_consumed_samples(32);
  state.layout.set_tensor_model_parallel_size(1);
  state.optimizer_steps = iteration - 1;
  state.rng_states = {{"dropout", std::string("\x01\x00\x02", 3)}};
  return state;
}

std::vector<LocalShard> Model() {
  std::vector<LocalShard> shards;
  shards.push_back(FilledShard("embedding.word_embeddings.weight", {16, 8}, ElementRange(0, 128)));
  shards.push_back(FilledShard("layers.0.mlp.fc1.bias", {32}, ElementRange(0, 32)));
  shards.push_back(
      FilledShard("optimizer.exp_avg/layers.0.mlp.fc1.bias", {32}, ElementRange(0, 32)));
  shards.push_back(FilledShard("final_norm.scale", {}, ElementRange(0, 1)));  // a scalar
  shards.push_back(FilledShard("empty", {0, 8}, {}));
  return shards;
}

std::vector<LocalShard> EmptyLike(const std::vector<LocalShard>& shards) {
  std::vector<LocalShard> out;
  for (const LocalShard& s : shards) out.push_back(EmptyShard(s.name, s.global_shape, s.runs));
  return out;
}

absl::Status Save(const std::string& dir, const CheckpointState& state,
                  std::vector<LocalShard>& shards) {
  SelfCommunicator world;
  return SaveCheckpoint(dir, state, Refs(shards), world);
}

TEST(RoundTripTest, ValuesComeBackBitForBit) {
  const std::string dir = FreshDir("round_trip");
  std::vector<LocalShard> saved = Model();
  // Values a float round trip through text or arithmetic would change (NaN and
  // infinity are refused at load: NonFiniteValuesAreRefusedNamingTheTensor).
  saved[1].data[0] = -0.0f;
  saved[1].data[1] = std::numeric_limits<float>::denorm_min();
  saved[1].data[2] = std::numeric_limits<float>::max();
  uint32_t one_ulp_above_one = 0x3F800001;
  std::memcpy(&saved[1].data[3], &one_ulp_above_one, 4);
  ASSERT_TRUE(Save(dir, StateAt(10), saved).ok());

  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->iteration(), 10);
  EXPECT_EQ(ckpt->directory(), dir + "/iter_0000010");
  std::vector<LocalShard> loaded = EmptyLike(saved);
  LoadStats stats;
  ASSERT_TRUE(LoadTensors(*ckpt, Refs(loaded), &stats).ok());
  for (size_t i = 0; i < saved.size(); ++i) {
    ASSERT_EQ(saved[i].data.size(), loaded[i].data.size());
    EXPECT_EQ(std::memcmp(saved[i].data.data(), loaded[i].data.data(),
                          saved[i].data.size() * sizeof(float)),
              0)
        << saved[i].name;
  }
  EXPECT_EQ(stats.bytes_read, (128 + 32 + 32 + 1) * 4);
}

// A run that diverged and saved anyway: the checksums hold, the values cannot be
// trained from. The load names the tensor and how many values are bad.
TEST(RoundTripTest, NonFiniteValuesAreRefusedNamingTheTensor) {
  const std::string dir = FreshDir("non_finite");
  std::vector<LocalShard> saved = Model();
  saved[2].data[5] = std::numeric_limits<float>::quiet_NaN();
  saved[2].data[6] = -std::numeric_limits<float>::infinity();
  ASSERT_TRUE(Save(dir, StateAt(4), saved).ok());
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<LocalShard> loaded = EmptyLike(saved);
  const absl::Status status = LoadTensors(*ckpt, Refs(loaded));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(dir + "/iter_0000004"),
                    HasSubstr("tensor optimizer.exp_avg/layers.0.mlp.fc1.bias holds 2 NaN or "
                              "infinite values (of the 32 elements this rank loaded)"),
                    HasSubstr("--ckpt-step")));
}

TEST(RoundTripTest, TheStateComesBackWhole) {
  const std::string dir = FreshDir("state");
  std::vector<LocalShard> shards = Model();
  ASSERT_TRUE(Save(dir, StateAt(7), shards).ok());
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const CheckpointState state = ckpt->State(0);
  EXPECT_EQ(state.config.model().hidden_size(), 8);
  EXPECT_EQ(state.config.training().seed(), 99);
  EXPECT_EQ(state.iteration, 7);
  EXPECT_EQ(state.consumed_samples, 112);
  EXPECT_EQ(state.data_position.train_consumed_samples(), 112);
  EXPECT_EQ(state.data_position.valid_consumed_samples(), 32);
  EXPECT_EQ(state.data_position.test_consumed_samples(), 0);
  EXPECT_EQ(state.layout.tensor_model_parallel_size(), 1);
  EXPECT_EQ(state.layout.world_size(), 1);
  EXPECT_EQ(state.optimizer_steps, 6);
  ASSERT_EQ(state.rng_states.size(), 1u);
  EXPECT_EQ(state.rng_states[0].name, "dropout");
  EXPECT_EQ(state.rng_states[0].state, std::string("\x01\x00\x02", 3));
  EXPECT_TRUE(ckpt->State(1).rng_states.empty());
  EXPECT_THAT(ckpt->TensorNames(),
              ElementsAre("embedding.word_embeddings.weight", "empty", "final_norm.scale",
                          "layers.0.mlp.fc1.bias", "optimizer.exp_avg/layers.0.mlp.fc1.bias"));
  EXPECT_NE(ckpt->FindTensor("final_norm.scale"), nullptr);
  EXPECT_EQ(ckpt->FindTensor("nope"), nullptr);
}

TEST(RoundTripTest, LatestPointsAtTheNewestSaveAndCkptStepPicksAnOlderOne) {
  const std::string dir = FreshDir("latest");
  for (int64_t it : {5, 10, 15}) {
    std::vector<LocalShard> shards = Model();
    for (float& v : shards[1].data) v += static_cast<float>(it);  // tell iterations apart
    ASSERT_TRUE(Save(dir, StateAt(it), shards).ok());
    EXPECT_EQ(*ReadLatestIteration(dir), it);
  }
  EXPECT_EQ(*ReadSmallFile(dir + "/latest_checkpointed_iteration.txt"), "15\n");

  absl::StatusOr<LoadedCheckpoint> latest = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->iteration(), 15);

  absl::StatusOr<LoadedCheckpoint> older = OpenCheckpoint(dir, 10);
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->iteration(), 10);
  std::vector<LocalShard> target = {EmptyShard("layers.0.mlp.fc1.bias", {32}, ElementRange(0, 32))};
  ASSERT_TRUE(LoadTensors(*older, Refs(target)).ok());
  EXPECT_EQ(target[0].data[5], testing_util::GlobalValue("layers.0.mlp.fc1.bias", 5) + 10.0f);

  const absl::Status missing = OpenCheckpoint(dir, 12).status();
  EXPECT_TRUE(absl::IsNotFound(missing));
  EXPECT_THAT(missing.message(), HasSubstr("iter_0000012 does not exist"));
  EXPECT_THAT(missing.message(), HasSubstr("committed iterations in " + dir + ": 5, 10, 15"));
}

TEST(RoundTripTest, SavingAnIterationAgainReplacesIt) {
  const std::string dir = FreshDir("resave");
  std::vector<LocalShard> first = Model();
  ASSERT_TRUE(Save(dir, StateAt(3), first).ok());
  std::vector<LocalShard> second = Model();
  second[1].data[0] = 1234.5f;
  ASSERT_TRUE(Save(dir, StateAt(3), second).ok());

  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok());
  std::vector<LocalShard> target = {EmptyShard("layers.0.mlp.fc1.bias", {32}, ElementRange(0, 32))};
  ASSERT_TRUE(LoadTensors(*ckpt, Refs(target)).ok());
  EXPECT_EQ(target[0].data[0], 1234.5f);
  // No leftovers of either save.
  EXPECT_THAT(*ListDir(dir), ElementsAre("iter_0000003", "latest_checkpointed_iteration.txt"));
  EXPECT_THAT(*ListDir(dir + "/iter_0000003"), ElementsAre("manifest.pb", "rank_00000.bin"));
}

TEST(RoundTripTest, AMissingTensorIsNamed) {
  const std::string dir = FreshDir("missing_tensor");
  std::vector<LocalShard> shards = Model();
  ASSERT_TRUE(Save(dir, StateAt(1), shards).ok());
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok());
  std::vector<LocalShard> target = {
      EmptyShard("optimizer.exp_avg_sq/layers.0.mlp.fc1.bias", {32}, ElementRange(0, 32))};
  const absl::Status status = LoadTensors(*ckpt, Refs(target));
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_THAT(status.message(),
              HasSubstr("has no tensor 'optimizer.exp_avg_sq/layers.0.mlp.fc1.bias'"));
}

TEST(RoundTripTest, ADifferentGlobalShapeIsRefusedWithBothShapes) {
  const std::string dir = FreshDir("shape");
  std::vector<LocalShard> shards = Model();
  ASSERT_TRUE(Save(dir, StateAt(1), shards).ok());
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok());
  std::vector<LocalShard> target = {
      EmptyShard("embedding.word_embeddings.weight", {32, 4}, ElementRange(0, 128))};
  const absl::Status status = LoadTensors(*ckpt, Refs(target));
  EXPECT_TRUE(absl::IsFailedPrecondition(status));
  EXPECT_THAT(status.message(), HasSubstr("tensor embedding.word_embeddings.weight"));
  EXPECT_THAT(status.message(),
              HasSubstr("stores global shape [16, 8] but this run expects [32, 4]"));
}

TEST(RoundTripTest, BadSaveArgumentsAreNamedAndCommitNothing) {
  const std::string dir = FreshDir("bad_args");
  std::vector<LocalShard> shards = Model();
  shards[1].data.pop_back();  // n no longer matches the runs
  const absl::Status status = Save(dir, StateAt(4), shards);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("rank 0"));
  EXPECT_THAT(status.message(), HasSubstr("shard of tensor 'layers.0.mlp.fc1.bias'"));
  EXPECT_THAT(status.message(), HasSubstr("its runs name 32 elements but it holds n = 31"));
  EXPECT_TRUE(absl::IsNotFound(ReadLatestIteration(dir).status()));
  EXPECT_FALSE(PathExists(dir + "/iter_0000004"));
}

TEST(RoundTripTest, TargetsThatDoNotFitTheirShapeAreRefused) {
  const std::string dir = FreshDir("bad_target");
  std::vector<LocalShard> shards = Model();
  ASSERT_TRUE(Save(dir, StateAt(1), shards).ok());
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok());
  std::vector<LocalShard> target = {EmptyShard("layers.0.mlp.fc1.bias", {32}, ElementRange(30, 4))};
  EXPECT_TRUE(absl::IsInvalidArgument(LoadTensors(*ckpt, Refs(target))));
}

}  // namespace
}  // namespace conveyor
