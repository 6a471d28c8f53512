#include "data/numpy_random.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace conveyor {
namespace {

TEST(NumpyRandomTest, Mt19937ReferenceOutput) {
  // The MT19937 reference implementation's first output for its default seed.
  NumpyRandomState rng(5489);
  EXPECT_EQ(rng.NextUint32(), 3499211612u);
}

TEST(NumpyRandomTest, RandomSampleMatchesNumpy) {
  // numpy.random.RandomState(0).random_sample(3)
  NumpyRandomState rng(0);
  EXPECT_DOUBLE_EQ(rng.RandomSample(), 0.5488135039273248);
  EXPECT_DOUBLE_EQ(rng.RandomSample(), 0.7151893663724195);
  EXPECT_DOUBLE_EQ(rng.RandomSample(), 0.6027633760716439);
  // numpy.random.RandomState(42).random_sample()
  EXPECT_DOUBLE_EQ(NumpyRandomState(42).RandomSample(), 0.3745401188473625);
}

TEST(NumpyRandomTest, PermutationMatchesNumpy) {
  // numpy.random.RandomState(0).permutation(10)
  EXPECT_EQ(NumpyRandomState(0).Permutation(10),
            (std::vector<int64_t>{2, 8, 4, 9, 1, 6, 7, 3, 0, 5}));
}

TEST(NumpyRandomTest, RandIntMatchesMegatronFixtureTokens) {
  // The fixture's documents are successive RandomState(1234).randint(0, 50257,
  // size=L) draws, one document after another.
  const Json fixture = testing_util::ReadJsonOrDie(testing_util::TestDataDir() +
                                                        "/megatron-fixtures/tiny_uint16.json");
  NumpyRandomState rng(1234);
  int checked = 0;
  for (const Json& doc : fixture["documents"]) {
    for (int64_t token : doc["sequences"][0].get<std::vector<int64_t>>()) {
      ASSERT_EQ(rng.RandInt(0, 50257), token) << "draw " << checked;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 323);
}

TEST(NumpyRandomTest, RandomIntervalStaysInRange) {
  NumpyRandomState rng(7);
  for (uint64_t max : {1ull, 2ull, 5ull, 1000ull, 0x1ffffffffull}) {
    for (int i = 0; i < 200; ++i) EXPECT_LE(rng.RandomInterval(max), max);
  }
  EXPECT_EQ(rng.RandomInterval(0), 0u);
}

}  // namespace
}  // namespace conveyor
