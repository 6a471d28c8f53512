// CRC32C: the standard check value, chaining, and the instruction path against the
// table path on every length and alignment around the 8-byte steps.
#include "trainer/checkpoint/crc32c.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  const std::string check = "123456789";
  EXPECT_EQ(Crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32cTest, ThirtyTwoZeroBytesMatchRfc3720) {
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros.
  const std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(Crc32cTest, ChainsAcrossPieces) {
  const std::string text = "layers.0.mlp.fc1.weight holds these bytes";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(Crc32c(text.data() + cut, text.size() - cut, Crc32c(text.data(), cut)),
              Crc32c(text.data(), text.size()))
        << "cut at " << cut;
  }
}

TEST(Crc32cTest, InstructionPathEqualsTablePath) {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(300);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n = 0; offset + n <= bytes.size(); n += 7) {
      ASSERT_EQ(Crc32c(bytes.data() + offset, n), Crc32cPortable(bytes.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
}

}  // namespace
}  // namespace conveyor
