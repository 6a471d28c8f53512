// What a rank's files are compared by (file_digest.h): small files whole, large ones by
// sampled blocks (a dataset is never read twice), and safetensors files also by every
// tensor's ends, so that weights differing in one small tensor differ here too.
#include "trainer/file_digest.h"

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {
namespace {

using testing_util::FreshDir;

std::string Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(FileDigestTest, SmallFilesAreHashedWholeAndLargeOnesSampled) {
  const std::string dir = FreshDir("digest");
  EXPECT_EQ(*DescribeFileContents(Write(dir + "/small", "123456789")),
            "9 bytes, CRC32C e3069283");  // the CRC32C check value
  // 3 MiB sampled (as a dataset's .bin): blocks of 4 KiB every (3 MiB - 4 KiB) / 255
  // bytes, about 12 KiB apart.
  const std::string large(3 << 20, 'x');
  const std::string described = *DescribeFileContents(Write(dir + "/large", large), 0);
  EXPECT_THAT(described, ::testing::MatchesRegex(
                             "3145728 bytes, CRC32C [0-9a-f]{8} of 256 sampled 4 KiB blocks"));
  std::string between = large;  // a byte between the first two blocks
  between[6000] = 'y';
  EXPECT_EQ(*DescribeFileContents(Write(dir + "/between", between), 0), described);
  std::string sampled = large;  // a byte of the last block
  sampled[large.size() - 1] = 'y';
  EXPECT_NE(*DescribeFileContents(Write(dir + "/sampled", sampled), 0), described);
  // Up to kWholeFileDigestBytes by default, and never sampled below 1 MiB: hashed whole.
  EXPECT_NE(*DescribeFileContents(dir + "/between"), *DescribeFileContents(dir + "/large"));
  EXPECT_EQ(*DescribeFileContents(dir + "/small", 0), "9 bytes, CRC32C e3069283");
  EXPECT_TRUE(absl::IsNotFound(DescribeFileContents(dir + "/absent").status()));
  EXPECT_EQ(DescribeUnreadable(DescribeFileContents(dir + "/absent").status()),
            "cannot be read (NOT_FOUND)");
}

// Above kWholeFileDigestBytes, weight files that differ only in a 4-element norm in the
// middle of the file, between the sampled blocks.
TEST(FileDigestTest, SafetensorsDifferingInOneSmallTensorDiffer) {
  const std::string dir = FreshDir("digest_safetensors");
  const int64_t half = kWholeFileDigestBytes / 8 + 1024;
  std::vector<std::string> sampled, described;
  for (float norm : {1.0f, 2.0f}) {
    HfTensorMap tensors;
    tensors["a.weight"] = {{half}, std::vector<float>(half, 0.5f)};
    tensors["m.norm"] = {{4}, {1, 1, 1, norm}};
    tensors["z.weight"] = {{half}, std::vector<float>(half, 0.25f)};
    const std::string path = dir + "/model" + std::to_string(int(norm)) + ".safetensors";
    ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
    sampled.push_back(DescribeFileContents(path).value());
    described.push_back(DescribeSafetensorsFile(path).value());
  }
  EXPECT_EQ(sampled[0], sampled[1]);  // the sampled blocks alone miss the norm
  EXPECT_NE(described[0], described[1]);
  EXPECT_THAT(described[0], ::testing::HasSubstr("of the header, each tensor's first and last 256 "
                                                 "bytes and 256 sampled 4 KiB blocks"));
}

}  // namespace
}  // namespace conveyor
