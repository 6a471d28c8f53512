// The whole micro-batch's per-token rows under context parallelism against the chunk
// layout written out here (each sample cut into 2 CP chunks, rank r holding chunks r and
// 2 CP - 1 - r): gathering the ranks' rows gives the rows in sample order, and a rank's
// rows of the whole are its own. The ranks' all-gather is played by a communicator that
// hands every rank's rows over as the group would.
#include "model/context_rows.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "parallel/communicator.h"
#include "parallel/self_communicator.h"

namespace conveyor {
namespace {

constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 8;
constexpr int64_t kWidth = 3;

// Row t of the micro-batch ([batch * seq] in sample order): distinct values.
std::vector<float> WholeRows() {
  std::vector<float> rows(kBatch * kSeq * kWidth);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<float>(100 * (i / kWidth) + i % kWidth);
  }
  return rows;
}

// Rank r's rows by the chunk rule: per sample, chunk r's tokens then chunk 2cp-1-r's.
std::vector<float> RankRows(int cp, int r) {
  const std::vector<float> whole = WholeRows();
  const int64_t chunk = kSeq / (2 * cp);
  std::vector<float> rows;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (const int64_t c : {int64_t{r}, int64_t{2 * cp - 1 - r}}) {
      for (int64_t p = c * chunk; p < (c + 1) * chunk; ++p) {
        const float* row = whole.data() + (b * kSeq + p) * kWidth;
        rows.insert(rows.end(), row, row + kWidth);
      }
    }
  }
  return rows;
}

// Rank `rank` of `cp` whose all-gather returns every rank's RankRows, after checking
// that the rank sent its own.
class ChunkGroup : public Communicator {
 public:
  ChunkGroup(int cp, int rank) : cp_(cp), rank_(rank), name_(absl::StrCat("cp", cp)) {}
  int rank() const override { return rank_; }
  int size() const override { return cp_; }
  const std::string& name() const override { return name_; }
  bool Reaches(MemoryKind where) const override { return where == MemoryKind::kHost; }
  absl::Status Barrier() override { return absl::OkStatus(); }

 protected:
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override {
    const std::vector<float> own = RankRows(cp_, rank_);
    if (in.count != static_cast<int64_t>(own.size()) ||
        std::memcmp(in.data, own.data(), in.bytes()) != 0) {
      return absl::InvalidArgumentError("the rank did not send its own rows");
    }
    float* to = static_cast<float*>(out.data);
    for (int r = 0; r < cp_; ++r) {
      const std::vector<float> rows = RankRows(cp_, r);
      std::memcpy(to + r * in.count, rows.data(), rows.size() * sizeof(float));
    }
    return absl::OkStatus();
  }
  absl::Status DoAllReduceSum(const Buffer&) override { return Unused(); }
  absl::Status DoAllReduceMax(const Buffer&) override { return Unused(); }
  absl::Status DoReduceScatterSum(const ConstBuffer&, const Buffer&) override { return Unused(); }
  absl::Status DoBroadcast(const Buffer&, int) override { return Unused(); }
  absl::Status DoBatchSendRecv(const std::vector<P2POp>&) override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("only AllGather is used"); }

  int cp_, rank_;
  std::string name_;
};

MicroBatchContext Context(const Communicator& group) {
  MicroBatchContext mb;
  mb.batch = kBatch;
  mb.seq = kSeq;
  mb.cp_size = group.size();
  mb.cp_rank = group.rank();
  return mb;
}

TEST(ContextRowsTest, GatherAssemblesTheSampleOrderAndLocalRowsTakeTheRanksBack) {
  for (const int cp : {2, 4}) {  // chunks of two tokens, and of one
    for (int r = 0; r < cp; ++r) {
      SCOPED_TRACE(absl::StrCat("CP ", cp, ", rank ", r));
      ChunkGroup group(cp, r);
      const MicroBatchContext mb = Context(group);
      const std::vector<float> own = RankRows(cp, r);
      absl::StatusOr<std::vector<float>> whole = GatherMicroBatchRows(mb, group, own, kWidth);
      ASSERT_TRUE(whole.ok()) << whole.status();
      EXPECT_EQ(*whole, WholeRows());
      const std::vector<float> whole_rows = WholeRows();
      EXPECT_EQ(LocalRowsOfWidth<float>(mb, whole_rows, kWidth), own);
    }
  }
}

TEST(ContextRowsTest, WithoutContextParallelismEveryRowIsHere) {
  SelfCommunicator one_rank("cp");
  const MicroBatchContext mb = Context(one_rank);
  const std::vector<float> whole = WholeRows();
  absl::StatusOr<std::vector<float>> gathered = GatherMicroBatchRows(mb, one_rank, whole, kWidth);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(*gathered, whole);
  EXPECT_EQ(LocalRowsOfWidth<float>(mb, whole, kWidth), whole);
}

// A collective that fails comes back as the error.
TEST(ContextRowsTest, AGatherThatFailsIsAnError) {
  ChunkGroup group(2, 1);
  const MicroBatchContext mb = Context(group);
  const std::vector<float> not_own(RankRows(2, 1).size(), 0.0f);
  absl::StatusOr<std::vector<float>> whole = GatherMicroBatchRows(mb, group, not_own, kWidth);
  EXPECT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("its own rows"), std::string::npos) << whole.status();
}

// Rows that are not the context's tokens are refused, not read past.
TEST(ContextRowsTest, RowsThatAreNotTheContextsAreRefused) {
  SelfCommunicator one_rank("cp");
  const MicroBatchContext mb = Context(one_rank);
  const std::vector<float> short_rows(kWidth * (kBatch * kSeq - 1), 0.0f);
  absl::StatusOr<std::vector<float>> gathered =
      GatherMicroBatchRows(mb, one_rank, short_rows, kWidth);
  EXPECT_FALSE(gathered.ok());
  EXPECT_NE(gathered.status().message().find("45 values, not 16 tokens"), std::string::npos)
      << gathered.status();
}

}  // namespace
}  // namespace conveyor
