// Damaged checkpoints fail loudly, naming the file (and tensor, rank and checksums
// where there are some): flipped bytes, truncation, missing files, foreign versions.
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/envelope.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing_util::BlockRuns;
using testing_util::EmptyShard;
using testing_util::FilledShard;
using testing_util::FreshDir;
using testing_util::LocalShard;
using testing_util::Refs;

std::vector<LocalShard> Shards() {
  std::vector<LocalShard> shards;
  shards.push_back(FilledShard("layers.0.mlp.fc1.weight", {8, 4}, ElementRange(0, 32)));
  shards.push_back(FilledShard("layers.0.mlp.fc1.bias", {8}, ElementRange(0, 8)));
  return shards;
}

std::vector<LocalShard> Targets() {
  std::vector<LocalShard> shards;
  shards.push_back(EmptyShard("layers.0.mlp.fc1.weight", {8, 4}, ElementRange(0, 32)));
  shards.push_back(EmptyShard("layers.0.mlp.fc1.bias", {8}, ElementRange(0, 8)));
  return shards;
}

// A saved single-rank checkpoint of iteration 3; returns its folder.
std::string SaveOne(const std::string& name) {
  const std::string dir = FreshDir(name);
  std::vector<LocalShard> shards = Shards();
  SelfCommunicator world;
  CheckpointState state;
  state.iteration = 3;
  EXPECT_TRUE(SaveCheckpoint(dir, state, Refs(shards), world).ok());
  return dir;
}

void FlipByte(const std::string& path, int64_t offset) {
  std::string bytes = *ReadSmallFile(path);
  bytes[offset] ^= 0x01;
  ASSERT_TRUE(WriteFileDurably(path, bytes).ok());
}

void Truncate(const std::string& path, int64_t keep) {
  std::string bytes = *ReadSmallFile(path);
  ASSERT_TRUE(WriteFileDurably(path, bytes.substr(0, keep)).ok());
}

TEST(CorruptionTest, AFlippedShardByteNamesFileTensorRankAndChecksums) {
  const std::string dir = SaveOne("flip");
  const std::string data = dir + "/iter_0000003/rank_00000.bin";
  FlipByte(data, 40);  // inside fc1.weight (bytes [0, 128))
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();  // opening checks sizes, not data
  std::vector<LocalShard> targets = Targets();
  const absl::Status status = LoadTensors(*ckpt, Refs(targets));
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              MatchesRegex("checksum mismatch in .*/iter_0000003/rank_00000.bin bytes \\[0, 128\\) "
                           "holding tensor layers.0.mlp.fc1.weight \\(shard written by rank 0\\): "
                           "crc32c expected 0x[0-9a-f]{8}, found 0x[0-9a-f]{8}"));
  // The other record is intact and still loads.
  std::vector<LocalShard> bias = {Targets()[1]};
  EXPECT_TRUE(LoadTensors(*ckpt, Refs(bias)).ok());
  EXPECT_EQ(testing_util::CountWrong(bias[0]), 0);
}

TEST(CorruptionTest, EveryFlippedDataByteIsCaught) {
  const std::string dir = SaveOne("flip_all");
  const std::string data = dir + "/iter_0000003/rank_00000.bin";
  const std::string clean = *ReadSmallFile(data);
  for (size_t offset = 0; offset < clean.size(); ++offset) {
    std::string bad = clean;
    bad[offset] ^= 0x80;
    ASSERT_TRUE(WriteFileDurably(data, bad).ok());
    absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
    ASSERT_TRUE(ckpt.ok());
    std::vector<LocalShard> targets = Targets();
    EXPECT_TRUE(absl::IsDataLoss(LoadTensors(*ckpt, Refs(targets)))) << "byte " << offset;
  }
}

TEST(CorruptionTest, ATruncatedManifestIsAClearError) {
  const std::string dir = SaveOne("manifest_truncated");
  const std::string manifest = dir + "/iter_0000003/manifest.pb";
  const int64_t size = ReadSmallFile(manifest)->size();
  Truncate(manifest, size - 5);
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(manifest + " is truncated: its header promises"));

  Truncate(manifest, 0);
  EXPECT_TRUE(absl::IsDataLoss(OpenCheckpoint(dir, std::nullopt).status()));
}

TEST(CorruptionTest, AFlippedManifestByteIsCaught) {
  const std::string dir = SaveOne("manifest_flip");
  const std::string manifest = dir + "/iter_0000003/manifest.pb";
  FlipByte(manifest, 30);
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(), HasSubstr(manifest + " is corrupt: crc32c"));
}

TEST(CorruptionTest, AMissingManifestIsNamed) {
  const std::string dir = SaveOne("manifest_missing");
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000003/manifest.pb").ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_THAT(status.message(), HasSubstr("iter_0000003 has no manifest.pb"));
}

TEST(CorruptionTest, ATruncatedDataFileIsCaughtOnOpen) {
  const std::string dir = SaveOne("data_truncated");
  Truncate(dir + "/iter_0000003/rank_00000.bin", 150);
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("rank_00000.bin is truncated: it has 150 bytes but the "
                        "shard of tensor layers.0.mlp.fc1.bias ends at byte 160"));
}

TEST(CorruptionTest, AMissingShardFileIsNamed) {
  const std::string dir = FreshDir("data_missing");
  testing_util::InProcessWorld world(2);
  const std::vector<absl::Status> results = world.Run([&](int rank, Communicator& comm) {
    std::vector<LocalShard> shards = {FilledShard("w", {4, 4}, BlockRuns({4, 4}, 0, 2, rank))};
    CheckpointState state;
    state.iteration = 8;
    return SaveCheckpoint(dir, state, Refs(shards), comm);
  });
  ASSERT_TRUE(results[0].ok() && results[1].ok());
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000008/rank_00001.bin").ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("checkpoint data file " + dir +
                                          "/iter_0000008/rank_00001.bin is missing (it holds "
                                          "shards of tensor w"));
}

TEST(CorruptionTest, AGarbledLatestFileIsNamedWithItsContents) {
  const std::string dir = SaveOne("latest_garbled");
  ASSERT_TRUE(WriteFileDurably(dir + "/latest_checkpointed_iteration.txt", "release\n").ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(), HasSubstr("latest_checkpointed_iteration.txt should hold an "
                                          "iteration number but holds \"release\""));
}

TEST(CorruptionTest, ANewerFormatVersionIsRefused) {
  const std::string dir = SaveOne("newer");
  const std::string path = dir + "/iter_0000003/manifest.pb";
  Manifest manifest;
  ASSERT_TRUE(ReadEnvelopeFile(path, &manifest).ok());
  manifest.set_format_version(2);
  ASSERT_TRUE(WriteEnvelopeFile(path, manifest).ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status));
  EXPECT_THAT(status.message(), HasSubstr("format version 2, newer than the version 1"));
}

TEST(CorruptionTest, ManifestsThatPointOutsideTheFolderAreRefused) {
  const std::string dir = SaveOne("escape");
  const std::string path = dir + "/iter_0000003/manifest.pb";
  Manifest manifest;
  ASSERT_TRUE(ReadEnvelopeFile(path, &manifest).ok());
  manifest.mutable_tensors(0)->mutable_shards(0)->set_file("../../etc/passwd");
  ASSERT_TRUE(WriteEnvelopeFile(path, manifest).ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(), HasSubstr("file name \"../../etc/passwd\""));
}

TEST(CorruptionTest, InconsistentShardRecordsAreRefusedOnOpen) {
  const std::string dir = SaveOne("inconsistent");
  const std::string path = dir + "/iter_0000003/manifest.pb";
  Manifest manifest;
  ASSERT_TRUE(ReadEnvelopeFile(path, &manifest).ok());
  manifest.mutable_tensors(1)->mutable_shards(0)->mutable_runs(0)->set_length(20);
  ASSERT_TRUE(WriteEnvelopeFile(path, manifest).ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("tensor layers.0.mlp.fc1.weight"));
}

}  // namespace
}  // namespace conveyor
