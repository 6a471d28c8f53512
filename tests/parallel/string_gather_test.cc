// Gathering text over a group (parallel/string_gather.h): every rank's string, of
// different lengths (empty, one byte, bytes of every value, a long one), arrives whole
// and in rank order on the root and only there, for each root; and on every rank for
// AllGatherStrings, also beyond 2^24 bytes.
#include "parallel/string_gather.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/in_process_world.h"

namespace conveyor {
namespace {

using testing_util::InProcessWorld;

// Rank r's text: rank 0 none, rank 1 one byte, rank 2 every byte value (NUL included)
// repeated, rank 3 a long text of its own.
std::string TextOf(int rank) {
  switch (rank) {
    case 0:
      return "";
    case 1:
      return "x";
    case 2: {
      std::string all;
      for (int i = 0; i < 3 * 256; ++i) all.push_back(static_cast<char>(i % 256));
      return all;
    }
    default:
      return std::string(1 << 20, static_cast<char>('a' + rank));
  }
}

TEST(GatherStringsToRootTest, EveryRanksTextArrivesWholeOnTheRootOnly) {
  constexpr int kRanks = 4;
  for (int root = 0; root < kRanks; ++root) {
    InProcessWorld world(kRanks);
    std::vector<std::vector<std::string>> got(kRanks);
    const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& comm) {
      absl::StatusOr<std::vector<std::string>> strings =
          GatherStringsToRoot(comm, TextOf(rank), root);
      if (!strings.ok()) return strings.status();
      got[rank] = *std::move(strings);
      return absl::OkStatus();
    });
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << "root " << root << ", rank " << r << ": " << statuses[r];
      if (r != root) {
        EXPECT_TRUE(got[r].empty()) << "root " << root << ", rank " << r;
        continue;
      }
      ASSERT_EQ(got[r].size(), kRanks);
      for (int from = 0; from < kRanks; ++from) {
        EXPECT_TRUE(got[r][from] == TextOf(from)) << "root " << root << ", from rank " << from;
      }
    }
  }
}

// Every rank of a world of `ranks` gathers text(r) from each rank r, whole and in order.
void ExpectEveryRankGathersEveryText(int ranks, const std::function<std::string(int)>& text) {
  InProcessWorld world(ranks);
  std::vector<std::vector<std::string>> got(ranks);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& comm) {
    absl::StatusOr<std::vector<std::string>> strings = AllGatherStrings(comm, text(rank));
    if (!strings.ok()) return strings.status();
    got[rank] = *std::move(strings);
    return absl::OkStatus();
  });
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    ASSERT_EQ(got[r].size(), ranks);
    for (int from = 0; from < ranks; ++from) {
      EXPECT_TRUE(got[r][from] == text(from)) << "on rank " << r << ", from rank " << from;
    }
  }
}

TEST(AllGatherStringsTest, EveryRankHasEveryText) { ExpectEveryRankGathersEveryText(4, TextOf); }

// Bytes travel as bytes: a text of 2^24 bytes and more (beyond what a float's integers
// hold exactly, the old encoding's limit) arrives whole, its last byte included.
TEST(AllGatherStringsTest, TextsOfTwoToTheTwentyFourBytesAndMoreArriveWhole) {
  ExpectEveryRankGathersEveryText(2, [](int rank) {
    std::string t((size_t{1} << 24) + rank, static_cast<char>(0xff));
    t.back() = static_cast<char>('A' + rank);
    return t;
  });
}

}  // namespace
}  // namespace conveyor
