#include "tests/util/in_process_world.h"

#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/communicator.h"

namespace conveyor {
namespace testing_util {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using P2POp = Communicator::P2POp;

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(InProcessWorldTest, CollectivesCombineEveryRank) {
  InProcessWorld world(3);
  std::vector<std::vector<float>> sums(3), gathered(3), broadcast(3);
  ExpectAllOk(world.Run([&](int rank, Communicator& comm) {
    sums[rank] = {float(rank), 1.0f};
    if (absl::Status s = comm.AllReduceSum(sums[rank].data(), 2); !s.ok()) return s;
    const float mine = 10.0f * rank;
    gathered[rank].resize(3);
    if (absl::Status s = comm.AllGather(&mine, 1, gathered[rank].data()); !s.ok()) return s;
    broadcast[rank] = {float(rank)};
    return comm.Broadcast(broadcast[rank].data(), 1, /*root=*/2);
  }));
  EXPECT_THAT(sums, Each(ElementsAre(3.0f, 3.0f)));
  EXPECT_THAT(gathered, Each(ElementsAre(0.0f, 10.0f, 20.0f)));
  EXPECT_THAT(broadcast, Each(ElementsAre(2.0f)));
}

// Every rank receives from its left neighbour and sends to its right one, receives
// posted first: buffered sends keep the ring from deadlocking.
TEST(InProcessWorldTest, BatchSendRecvMatchesARing) {
  constexpr int kRanks = 4;
  InProcessWorld world(kRanks);
  std::vector<std::vector<float>> received(kRanks, std::vector<float>(2));
  ExpectAllOk(world.Run([&](int rank, Communicator& comm) {
    std::vector<float> mine = {float(rank), float(rank) + 0.5f};
    return comm.BatchSendRecv({
        P2POp{false, (rank + kRanks - 1) % kRanks, received[rank].data(), 2},
        P2POp{true, (rank + 1) % kRanks, mine.data(), 2},
    });
  }));
  EXPECT_THAT(received[0], ElementsAre(3.0f, 3.5f));
  EXPECT_THAT(received[1], ElementsAre(0.0f, 0.5f));
  EXPECT_THAT(received[3], ElementsAre(2.0f, 2.5f));
}

// Messages of one direction match receives in the order they were sent, within a batch
// and across batches.
TEST(InProcessWorldTest, MessagesOfOneDirectionArriveInOrder) {
  InProcessWorld world(2);
  std::vector<float> got(3);
  ExpectAllOk(world.Run([&](int rank, Communicator& comm) {
    std::vector<float> first = {1.0f}, second = {2.0f}, third = {3.0f};
    if (rank == 0) {
      if (absl::Status s = comm.BatchSendRecv(
              {P2POp{true, 1, first.data(), 1}, P2POp{true, 1, second.data(), 1}});
          !s.ok()) {
        return s;
      }
      return comm.BatchSendRecv({P2POp{true, 1, third.data(), 1}});
    }
    if (absl::Status s = comm.BatchSendRecv({P2POp{false, 0, &got[0], 1}}); !s.ok()) return s;
    return comm.BatchSendRecv({P2POp{false, 0, &got[1], 1}, P2POp{false, 0, &got[2], 1}});
  }));
  EXPECT_THAT(got, ElementsAre(1.0f, 2.0f, 3.0f));
}

TEST(InProcessWorldTest, ReceiveOfAnotherSizeFails) {
  InProcessWorld world(2);
  const std::vector<absl::Status> statuses = world.Run([](int rank, Communicator& comm) {
    std::vector<float> buffer(4);
    return comm.BatchSendRecv({P2POp{rank == 0, 1 - rank, buffer.data(), rank == 0 ? 4 : 3}});
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(statuses[1].message(), HasSubstr("receives 12 bytes from rank 0, which sent 16"));
}

}  // namespace
}  // namespace testing_util
}  // namespace conveyor
