// The element index of a stored tensor: exactly-once coverage and piece lookup.
#include "trainer/checkpoint/tensor_index.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

void AddShard(TensorRecord* t, const std::vector<IndexRun>& runs, int rank) {
  ShardRecord* s = t->add_shards();
  RunsToProto(runs, s->mutable_runs());
  s->set_file("rank_0000" + std::to_string(rank) + ".bin");
  s->set_byte_length(CountElements(runs) * 4);
  s->set_writer_rank(rank);
}

TensorRecord Matrix(int rows, int cols) {
  TensorRecord t;
  t.set_name("w");
  t.add_global_shape(rows);
  t.add_global_shape(cols);
  t.set_dtype(ELEMENT_FLOAT32);
  return t;
}

TEST(TensorIndexTest, ColumnShardsTileTheMatrix) {
  TensorRecord t = Matrix(3, 4);
  AddShard(&t, {{0, 2, 3, 4}}, 0);  // columns 0-1
  AddShard(&t, {{2, 2, 3, 4}}, 1);  // columns 2-3
  absl::StatusOr<StoredTensorIndex> index = StoredTensorIndex::Build(t);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->numel(), 12);

  // Row 1 whole: two pieces, one from each record.
  const std::vector<StoredTensorIndex::Piece> pieces = index->Locate({{4, 4, 1, 0}});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].record, 0);
  EXPECT_EQ(pieces[0].record_offset, 2);
  EXPECT_EQ(pieces[0].target_offset, 0);
  EXPECT_EQ(pieces[0].length, 2);
  EXPECT_EQ(pieces[1].record, 1);
  EXPECT_EQ(pieces[1].record_offset, 2);
  EXPECT_EQ(pieces[1].target_offset, 2);

  // The whole of record 0 in its own order: merged into one piece.
  const std::vector<StoredTensorIndex::Piece> same = index->Locate({{0, 2, 3, 4}});
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0].length, 6);
}

TEST(TensorIndexTest, AGapIsRefusedWithItsRange) {
  TensorRecord t = Matrix(2, 4);
  AddShard(&t, {{0, 3, 1, 0}}, 0);
  AddShard(&t, {{5, 3, 1, 0}}, 1);
  const absl::Status status = StoredTensorIndex::Build(t).status();
  EXPECT_THAT(status.message(), HasSubstr("tensor w of shape [2, 4]: global elements [3, 5) "
                                          "are stored by no rank"));
  TensorRecord tail = Matrix(2, 4);
  AddShard(&tail, {{0, 6, 1, 0}}, 0);
  EXPECT_THAT(StoredTensorIndex::Build(tail).status().message(),
              HasSubstr("global elements [6, 8) are stored by no rank"));
}

TEST(TensorIndexTest, DoubleCoverageNamesBothRanks) {
  TensorRecord t = Matrix(2, 4);
  AddShard(&t, {{0, 8, 1, 0}}, 0);
  AddShard(&t, {{4, 4, 1, 0}}, 3);
  const absl::Status status = StoredTensorIndex::Build(t).status();
  EXPECT_THAT(status.message(), HasSubstr("global elements [4, 8) are stored twice"));
  EXPECT_THAT(status.message(), HasSubstr("rank 0 (rank_00000.bin)"));
  EXPECT_THAT(status.message(), HasSubstr("rank 3 (rank_00003.bin)"));
}

TEST(TensorIndexTest, ByteLengthMustMatchTheRuns) {
  TensorRecord t = Matrix(1, 4);
  AddShard(&t, {{0, 4, 1, 0}}, 0);
  t.mutable_shards(0)->set_byte_length(12);
  EXPECT_THAT(StoredTensorIndex::Build(t).status().message(),
              HasSubstr("4 fp32 elements need 16 bytes but the record has 12"));
}

TEST(TensorIndexTest, EmptyAndScalarTensors) {
  TensorRecord empty = Matrix(0, 4);
  EXPECT_TRUE(StoredTensorIndex::Build(empty).ok());
  TensorRecord scalar;
  scalar.set_name("s");
  AddShard(&scalar, {{0, 1, 1, 0}}, 0);
  EXPECT_TRUE(StoredTensorIndex::Build(scalar).ok());
}

}  // namespace
}  // namespace conveyor
