// The bytes on disk, pinned down: a shard file is the elements as little-endian fp32
// back to back; the manifest records where each shard is and its CRC32C; the folder
// and latest file are named as documented. Tools outside Conveyor rely on this.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/crc32c.h"
#include "trainer/checkpoint/envelope.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using testing_util::FreshDir;
using testing_util::LocalShard;
using testing_util::Refs;

TEST(DiskFormatTest, ShardFileAndManifestHoldExactlyTheDocumentedBytes) {
  const std::string dir = FreshDir("disk_format");
  std::vector<LocalShard> shards = {
      {"w", {2, 2}, ElementRange(0, 4), {1.0f, -2.0f, 0.5f, 3.0f}},
      // The two columns of a [2, 2] matrix as two shards: one strided run each.
      {"v", {2, 2}, {{1, 1, 2, 2}}, {1.0f, 0.25f}},
      {"v", {2, 2}, {{0, 1, 2, 2}}, {-4.0f, 2.0f}},
  };
  CheckpointState state;
  state.iteration = 7;
  state.consumed_samples = 56;
  state.config.mutable_model()->set_num_layers(3);
  SelfCommunicator world;
  const absl::Status saved = SaveCheckpoint(dir, state, Refs(shards), world);
  ASSERT_TRUE(saved.ok()) << saved;

  EXPECT_THAT(*ListDir(dir), ElementsAre("iter_0000007", "latest_checkpointed_iteration.txt"));
  EXPECT_EQ(*ReadSmallFile(dir + "/latest_checkpointed_iteration.txt"), "7\n");
  EXPECT_THAT(*ListDir(dir + "/iter_0000007"), ElementsAre("manifest.pb", "rank_00000.bin"));

  // IEEE-754 binary32, little-endian, in the order the shards were passed.
  const std::string expected_data = std::string(
      "\x00\x00\x80\x3f"   // 1.0
      "\x00\x00\x00\xc0"   // -2.0
      "\x00\x00\x00\x3f"   // 0.5
      "\x00\x00\x40\x40"   // 3.0
      "\x00\x00\x80\x3f"   // 1.0
      "\x00\x00\x80\x3e"   // 0.25
      "\x00\x00\x80\xc0"   // -4.0
      "\x00\x00\x00\x40",  // 2.0
      32);
  const std::string data = *ReadSmallFile(dir + "/iter_0000007/rank_00000.bin");
  EXPECT_EQ(data, expected_data);

  // The envelope: magic, CRC32C of the payload, reserved zero, payload length.
  const std::string file = *ReadSmallFile(dir + "/iter_0000007/manifest.pb");
  ASSERT_GE(file.size(), 24u);
  EXPECT_EQ(file.substr(0, 8), "CVYCKPT1");
  uint32_t crc, reserved;
  uint64_t length;
  std::memcpy(&crc, &file[8], 4);
  std::memcpy(&reserved, &file[12], 4);
  std::memcpy(&length, &file[16], 8);
  EXPECT_EQ(reserved, 0u);
  EXPECT_EQ(length, file.size() - 24);
  EXPECT_EQ(crc, Crc32cPortable(file.data() + 24, length));

  Manifest m;
  ASSERT_TRUE(m.ParseFromString(file.substr(24)));
  EXPECT_EQ(m.format_version(), 1);
  EXPECT_EQ(m.iteration(), 7);
  EXPECT_EQ(m.consumed_samples(), 56);
  EXPECT_EQ(m.config().model().num_layers(), 3);
  EXPECT_EQ(m.layout().world_size(), 1);
  EXPECT_GT(m.save_time_unix_seconds(), 1600000000);
  ASSERT_EQ(m.tensors_size(), 2);

  const TensorRecord& v = m.tensors(0);  // sorted by name
  EXPECT_EQ(v.name(), "v");
  EXPECT_THAT(v.global_shape(), ElementsAre(2, 2));
  EXPECT_EQ(v.dtype(), ELEMENT_FLOAT32);
  ASSERT_EQ(v.shards_size(), 2);  // in the order they were passed
  for (int k = 0; k < 2; ++k) {
    const ShardRecord& shard = v.shards(k);
    EXPECT_EQ(shard.file(), "rank_00000.bin");
    EXPECT_EQ(shard.byte_offset(), 16 + 8 * k);
    EXPECT_EQ(shard.byte_length(), 8);
    EXPECT_EQ(shard.crc32c(), Crc32cPortable(expected_data.data() + 16 + 8 * k, 8));
    EXPECT_EQ(shard.writer_rank(), 0);
    ASSERT_EQ(shard.runs_size(), 1);
    EXPECT_EQ(shard.runs(0).start(), 1 - k);  // column 1, then column 0
    EXPECT_EQ(shard.runs(0).length(), 1);
    EXPECT_EQ(shard.runs(0).count(), 2);
    EXPECT_EQ(shard.runs(0).stride(), 2);
  }

  const TensorRecord& w = m.tensors(1);
  EXPECT_EQ(w.name(), "w");
  EXPECT_THAT(w.global_shape(), ElementsAre(2, 2));
  ASSERT_EQ(w.shards_size(), 1);
  EXPECT_EQ(w.shards(0).byte_offset(), 0);
  EXPECT_EQ(w.shards(0).byte_length(), 16);
  EXPECT_EQ(w.shards(0).crc32c(), Crc32cPortable(expected_data.data(), 16));
  ASSERT_EQ(w.shards(0).runs_size(), 1);
  EXPECT_EQ(w.shards(0).runs(0).start(), 0);
  EXPECT_EQ(w.shards(0).runs(0).length(), 4);
  EXPECT_FALSE(w.shards(0).runs(0).has_count());
}

}  // namespace
}  // namespace conveyor
