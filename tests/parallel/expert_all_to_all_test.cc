// Expert parallelism's token exchange: four forked ranks, eight experts (two per rank),
// each rank sending an uneven number of rows per expert (some none); every row is
// labelled with its source rank, expert and index, so the expected layout after the
// exchange and the regrouping is written down here independently of the code.
#include "model/expert_all_to_all.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "parallel/launcher.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/parallel/multi_rank.h"

namespace conveyor {
namespace {

using testing_util::Fail;

constexpr int kRanks = 4;
constexpr int kExperts = 8;
constexpr int kLocal = kExperts / kRanks;
constexpr int64_t kWidth = 3;

// Rows rank `r` routes to expert `e`: 0, 1 or 2, varying with both.
int64_t RowsFor(int r, int e) { return (r + 2 * e) % 3; }

// Column c of the i-th row rank r sends to expert e.
float Label(int r, int e, int64_t i, int64_t c) {
  return static_cast<float>(r * 1000 + e * 100 + i * 10 + c);
}

int CheckExchange(const RankEnvironment& env) {
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> world =
      testing_util::ConnectWorld(env, absl::Seconds(20));
  if (!world.ok()) return Fail(env, world.status().ToString());
  Communicator& ep = **world;
  const int me = ep.rank();
  const Ops& ops = CpuOps::Get();

  // This rank's dispatched rows, expert-major over all experts.
  std::vector<int64_t> rows_per_expert;
  std::vector<float> sent;
  for (int e = 0; e < kExperts; ++e) {
    rows_per_expert.push_back(RowsFor(me, e));
    for (int64_t i = 0; i < RowsFor(me, e); ++i) {
      for (int64_t c = 0; c < kWidth; ++c) sent.push_back(Label(me, e, i, c));
    }
  }
  Tensor in = Tensor::Zeros({static_cast<int64_t>(sent.size()) / kWidth, kWidth},
                            MemoryCategory::kActivations);
  std::copy(sent.begin(), sent.end(), in.data());

  absl::StatusOr<ExpertRowCounts> counts = ExchangeExpertCounts(ep, rows_per_expert);
  if (!counts.ok()) return Fail(env, counts.status().ToString());
  const LocalExperts mine = LocalExpertsOf(kExperts, kRanks, me);
  if (mine.first != me * kLocal || mine.count != kLocal) return Fail(env, "LocalExpertsOf");
  for (int q = 0; q < kRanks; ++q) {
    for (int e = 0; e < kLocal; ++e) {
      if (counts->receive[q * kLocal + e] != RowsFor(q, mine.first + e)) {
        return Fail(env, absl::StrCat("received count from ", q, " for local expert ", e));
      }
    }
  }

  Tensor received = Tensor::Zeros({counts->received(), kWidth}, MemoryCategory::kActivations);
  absl::Status sent_rows =
      AllToAllRows(ep, ops, in, counts->SendRowsPerRank(), counts->ReceiveRowsPerRank(), &received);
  if (!sent_rows.ok()) return Fail(env, sent_rows.ToString());
  std::vector<int64_t> expert_begin;
  const std::vector<int32_t> order = ExpertMajorOrder(*counts, &expert_begin);
  Tensor grouped = Tensor::Zeros({counts->received(), kWidth}, MemoryCategory::kActivations);
  ops.PermuteTokens(received, order, {}, &grouped);

  // Expected: per local expert, the sources in rank order, each source's rows in order.
  std::vector<float> expected;
  std::vector<int64_t> expected_begin = {0};
  for (int e = 0; e < kLocal; ++e) {
    for (int q = 0; q < kRanks; ++q) {
      for (int64_t i = 0; i < RowsFor(q, mine.first + e); ++i) {
        for (int64_t c = 0; c < kWidth; ++c) expected.push_back(Label(q, mine.first + e, i, c));
      }
    }
    expected_begin.push_back(static_cast<int64_t>(expected.size()) / kWidth);
  }
  if (expert_begin != expected_begin) return Fail(env, "expert_begin");
  if (std::vector<float>(grouped.data(), grouped.data() + grouped.numel()) != expected) {
    return Fail(env, "the regrouped rows differ from (expert, source, row) order");
  }

  // The way back: ungroup, then the same exchange with the counts swapped, gives every
  // rank its own rows in their original places.
  Tensor ungrouped = Tensor::Zeros({counts->received(), kWidth}, MemoryCategory::kActivations);
  ops.PermuteTokens(grouped, InverseOrder(order), {}, &ungrouped);
  Tensor back = Tensor::Zeros(in.shape(), MemoryCategory::kActivations);
  absl::Status returned = AllToAllRows(ep, ops, ungrouped, counts->ReceiveRowsPerRank(),
                                       counts->SendRowsPerRank(), &back);
  if (!returned.ok()) return Fail(env, returned.ToString());
  if (std::vector<float>(back.data(), back.data() + back.numel()) != sent) {
    return Fail(env, "the rows sent back differ from the rows sent");
  }
  return 0;
}

TEST(ExpertAllToAllTest, FourRanksExchangeAndRegroupRows) {
  std::ostringstream err;
  EXPECT_EQ(LaunchLocalRanks(kRanks, CheckExchange, err), 0) << err.str();
}

// One rank: its rows stay, and the regrouping of a hand-made count table.
TEST(ExpertAllToAllTest, OrderRegroupsSourceMajorRowsByExpert) {
  ExpertRowCounts counts;
  counts.ranks = 2;
  counts.local_experts = 2;
  counts.send = {0, 0, 0, 0};
  counts.receive = {1, 2, 2, 0};  // source 0: e0 1 row, e1 2; source 1: e0 2, e1 none
  std::vector<int64_t> begin;
  // Source-major rows: 0 (s0 e0), 1-2 (s0 e1), 3-4 (s1 e0). Expert-major: e0 = 0, 3, 4;
  // e1 = 1, 2.
  const std::vector<int32_t> order = ExpertMajorOrder(counts, &begin);
  EXPECT_EQ(order, (std::vector<int32_t>{0, 3, 4, 1, 2}));
  EXPECT_EQ(begin, (std::vector<int64_t>{0, 3, 5}));
  EXPECT_EQ(InverseOrder(order), (std::vector<int32_t>{0, 3, 4, 1, 2}));
  EXPECT_EQ(counts.ReceiveRowsPerRank(), (std::vector<int64_t>{3, 2}));
}

}  // namespace
}  // namespace conveyor
