#include "data/gpt_index_cache.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset.h"
#include "data/md5.h"
#include "data/npy_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadFileOrDie;
using ::conveyor::testing_util::ReadJsonOrDie;
using ::conveyor::testing_util::TestDataDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Md5Test, Rfc1321Vectors) {
  EXPECT_EQ(Md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Md5Hex("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(Md5Hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(Md5Hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(Md5Hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  // Padding boundaries (Python's hashlib.md5 of 'x' * n).
  EXPECT_EQ(Md5Hex(std::string(55, 'x')), "04364420e25c512fd958a70738aa8f72");
  EXPECT_EQ(Md5Hex(std::string(56, 'x')), "668a72d5ba17f08e62dabcafad6db14b");
  EXPECT_EQ(Md5Hex(std::string(64, 'x')), "c1bb4f81d892b2d57947682aeb252456");
  std::string digits;
  for (int i = 0; i < 8; ++i) digits += "1234567890";
  EXPECT_EQ(Md5Hex(digits), "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(NpyTest, HeaderIsWhatNumpySaveWrites) {
  // numpy.save(f, numpy.array([1, 2, 3], dtype=numpy.int32)): a 118-byte
  // header ('v'), padded with spaces so the data starts at byte 128.
  auto bytes = EncodeNpy("<i4", {3}, {1, 2, -3});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_EQ(bytes->size(), 128u + 12u);
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
  EXPECT_EQ(bytes->substr(0, 10), std::string("\x93NUMPY\x01\x00v\x00", 10));
  EXPECT_EQ(bytes->substr(10, dict.size()), dict);
  EXPECT_EQ(bytes->substr(10 + dict.size(), 127 - 10 - dict.size()),
            std::string(127 - 10 - dict.size(), ' '));
  EXPECT_EQ((*bytes)[127], '\n');
  EXPECT_EQ(bytes->substr(128), std::string("\x01\0\0\0\x02\0\0\0\xfd\xff\xff\xff", 12));
}

TEST(NpyTest, RoundTripsAndRejectsDamage) {
  auto bytes = EncodeNpy("<u4", {2, 2}, {0, 1, 4294967295, 7});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_NE(bytes->find("'shape': (2, 2), }"), std::string::npos);
  auto a = DecodeNpy(*bytes, "x.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->descr, "<u4");
  EXPECT_THAT(a->shape, ElementsAre(2, 2));
  EXPECT_THAT(a->values, ElementsAre(0, 1, 4294967295, 7));
  auto truncated = DecodeNpy(bytes->substr(0, bytes->size() - 1), "x.npy");
  ASSERT_FALSE(truncated.ok());
  EXPECT_THAT(truncated.status().message(), HasSubstr("x.npy"));
  EXPECT_FALSE(DecodeNpy("not numpy", "y.npy").ok());
  EXPECT_FALSE(EncodeNpy("<i4", {1}, {int64_t{1} << 40}).ok());
  EXPECT_FALSE(EncodeNpy("<f8", {1}, {1}).ok());
}

class GptIndexCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = TestDataDir() + "/megatron-fixtures";
    expected_ = ReadJsonOrDie(dir + "/gpt_tiny_uint16_seq16_seed1234_n40.json");
    auto ds = IndexedDataset::Open(dir + "/tiny_uint16");
    ASSERT_TRUE(ds.ok()) << ds.status();
    lengths_ = (*ds)->sequence_lengths();
    documents_.resize(7);
    std::iota(documents_.begin(), documents_.end(), 0);
    key_.dataset_path = dir + "/tiny_uint16";
    key_.index_split = "train";
    key_.split = "1,0,0";
    key_.split_range = std::make_pair(0.0, 1.0);
    key_.num_sequences = 7;
    key_.num_tokens = (*ds)->num_tokens();
    key_.config.sequence_length = 16;
    key_.config.random_seed = 1234;
    key_.config.num_samples = 40;
    options_.path = FreshDir("index_cache") + "/cache";
  }

  void ExpectFixtureIndices(const GptIndices& idx) {
    testing_util::ExpectIndicesMatchFixture(idx, expected_);
    EXPECT_EQ(idx.num_epochs, 2);
    EXPECT_EQ(idx.tokens_per_epoch, 323);
  }

  Json expected_;
  std::vector<int32_t> lengths_;
  std::vector<int32_t> documents_;
  GptIndexKey key_;
  GptIndexCacheOptions options_;
};

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(GptIndexCacheTest, BuildsWritesAndLoadsMegatronLayout) {
  auto built = BuildOrLoadGptIndices(lengths_, documents_, key_, options_);
  ASSERT_TRUE(built.ok()) << built.status();
  ExpectFixtureIndices(*built);

  // Four files, Megatron's names and dtypes, no temporary left behind.
  const std::string hash = Md5Hex(GptIndexDescription(key_));
  const std::string base = hash + "-GPTDataset-train-";
  EXPECT_THAT(ListDir(options_.path),
              ElementsAre(base + "description.txt", base + "document_index.npy",
                          base + "sample_index.npy", base + "shuffle_index.npy"));
  const GptIndexCacheFiles files = CacheFilesFor(options_.path, key_);
  EXPECT_EQ(ReadFileOrDie(files.description), GptIndexDescription(key_));
  EXPECT_THAT(GptIndexDescription(key_), HasSubstr("\"num_samples\": 40,"));
  auto sample = DecodeNpy(ReadFileOrDie(files.sample_index), files.sample_index);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->descr, "<i4");
  EXPECT_THAT(sample->shape, ElementsAre(41, 2));
  auto shuffle = DecodeNpy(ReadFileOrDie(files.shuffle_index), files.shuffle_index);
  ASSERT_TRUE(shuffle.ok()) << shuffle.status();
  EXPECT_EQ(shuffle->descr, "<u4");

  // Another rank that sees the folder loads what the first one wrote.
  auto loaded = BuildOrLoadGptIndices(lengths_, documents_, key_, options_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectFixtureIndices(*loaded);
}

TEST_F(GptIndexCacheTest, DifferentParametersGetDifferentFiles) {
  GptIndexKey other = key_;
  other.config.random_seed = 1235;
  EXPECT_NE(CacheFilesFor("c", key_).description, CacheFilesFor("c", other).description);
  other = key_;
  other.num_tokens += 1;  // the files under the prefix changed
  EXPECT_NE(CacheFilesFor("c", key_).description, CacheFilesFor("c", other).description);
}

TEST_F(GptIndexCacheTest, LoadsTheCacheRatherThanRebuilding) {
  ASSERT_TRUE(BuildOrLoadGptIndices(lengths_, documents_, key_, options_).ok());
  // Swap two shuffle entries on disk: a valid but different cache.
  const GptIndexCacheFiles files = CacheFilesFor(options_.path, key_);
  std::vector<int64_t> shuffle = expected_["shuffle_index"]["data"].get<std::vector<int64_t>>();
  std::swap(shuffle[0], shuffle[1]);
  ASSERT_TRUE(
      WriteCacheFile(files.shuffle_index, *EncodeNpy("<u4", {int64_t(shuffle.size())}, shuffle))
          .ok());
  auto loaded = BuildOrLoadGptIndices(lengths_, documents_, key_, options_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->shuffle_index, shuffle);
}

TEST_F(GptIndexCacheTest, CorruptCacheIsAnErrorNamingTheFile) {
  ASSERT_TRUE(BuildOrLoadGptIndices(lengths_, documents_, key_, options_).ok());
  const GptIndexCacheFiles files = CacheFilesFor(options_.path, key_);
  std::vector<int64_t> bad(40, 99);  // sample 99 does not exist
  ASSERT_TRUE(WriteCacheFile(files.shuffle_index, *EncodeNpy("<u4", {40}, bad)).ok());
  auto loaded = BuildOrLoadGptIndices(lengths_, documents_, key_, options_);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(), HasSubstr(files.description));
  EXPECT_THAT(loaded.status().message(), HasSubstr("shuffle_index holds 99"));

  ASSERT_TRUE(WriteCacheFile(files.sample_index, "garbage").ok());
  loaded = BuildOrLoadGptIndices(lengths_, documents_, key_, options_);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr(files.sample_index));
}

// Damage that stays in range used to be served: a duplicated shuffle entry (a
// sample seen twice per epoch, another never), a document swapped for another,
// a sample start moved. Each is an error naming the damaged file and the fix.
TEST_F(GptIndexCacheTest, InRangeDamageIsAnErrorNamingTheFileAndTheFix) {
  ASSERT_TRUE(BuildOrLoadGptIndices(lengths_, documents_, key_, options_).ok());
  const GptIndexCacheFiles files = CacheFilesFor(options_.path, key_);
  const std::string fix = "; delete the four " + options_.path + "/" +
                          Md5Hex(GptIndexDescription(key_)) +
                          "-GPTDataset-train-* files and rerun to rebuild them";
  auto load = [&] { return BuildOrLoadGptIndices(lengths_, documents_, key_, options_); };

  std::vector<int64_t> shuffle = expected_["shuffle_index"]["data"].get<std::vector<int64_t>>();
  const std::vector<int64_t> good_shuffle = shuffle;
  shuffle[7] = shuffle[3];
  ASSERT_TRUE(WriteCacheFile(files.shuffle_index, *EncodeNpy("<u4", {40}, shuffle)).ok());
  auto loaded = load();
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(
      loaded.status().message(),
      absl::StrCat("cached indices ", files.description, ": ", files.shuffle_index,
                   " is damaged: shuffle_index holds sample ", shuffle[3],
                   " twice (again at entry 7): it must be a permutation of the 40 samples", fix));
  ASSERT_TRUE(WriteCacheFile(files.shuffle_index, *EncodeNpy("<u4", {40}, good_shuffle)).ok());
  ASSERT_TRUE(load().ok());

  // Document 0 twice, document 1 once: every id is in range.
  std::vector<int64_t> doc = expected_["document_index"]["data"].get<std::vector<int64_t>>();
  const std::vector<int64_t> good_doc = doc;
  ASSERT_EQ(std::find(doc.begin(), doc.end(), 1) - doc.begin(), 8);
  doc[8] = 0;
  ASSERT_TRUE(
      WriteCacheFile(files.document_index, *EncodeNpy("<i4", {int64_t(doc.size())}, doc)).ok());
  loaded = load();
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(absl::StrCat(files.document_index,
                                     " is damaged: document_index entry 8 is document 0, which "
                                     "appears more often than its 2 epochs",
                                     fix)));
  ASSERT_TRUE(
      WriteCacheFile(files.document_index, *EncodeNpy("<i4", {int64_t(good_doc.size())}, good_doc))
          .ok());

  // Sample 5 starts one token later: still inside its document, still in order.
  std::vector<int64_t> sample;
  for (const Json& row : expected_["sample_index"]["data"]) {
    for (int64_t v : row.get<std::vector<int64_t>>()) sample.push_back(v);
  }
  sample[2 * 5 + 1] += 1;
  ASSERT_TRUE(WriteCacheFile(files.sample_index, *EncodeNpy("<i4", {41, 2}, sample)).ok());
  loaded = load();
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(absl::StrCat(files.sample_index,
                                     " is damaged: sample_index row 5 starts 17 tokens after "
                                     "row 4, not --seq-length 16",
                                     fix)));
}

TEST_F(GptIndexCacheTest, ADirectoryInPlaceOfACacheFileIsNamed) {
  ASSERT_TRUE(BuildOrLoadGptIndices(lengths_, documents_, key_, options_).ok());
  const GptIndexCacheFiles files = CacheFilesFor(options_.path, key_);
  ASSERT_EQ(std::remove(files.sample_index.c_str()), 0);
  ASSERT_TRUE(std::filesystem::create_directory(files.sample_index));
  auto loaded = BuildOrLoadGptIndices(lengths_, documents_, key_, options_);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(absl::StrCat(files.sample_index, " is damaged: ", files.sample_index,
                                     " is a directory, not a file; delete the four ")));
}

TEST_F(GptIndexCacheTest, NoCachePathBuildsInMemoryOnEveryRank) {
  GptIndexCacheOptions none;
  auto built = BuildOrLoadGptIndices(lengths_, documents_, key_, none);
  ASSERT_TRUE(built.ok()) << built.status();
  ExpectFixtureIndices(*built);
}

TEST_F(GptIndexCacheTest, BuilderUsesTheCache) {
  DatasetBuildConfig c;
  c.sequence_length = 16;
  c.random_seed = 1234;
  c.split = "1,0,0";
  c.blend = Blend{{key_.dataset_path}, {}};
  c.cache = options_;
  auto first = BuildSplitDatasets(c, {40, 0, 0});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(ListDir(options_.path).size(), 4u);
  auto second = BuildSplitDatasets(c, {40, 0, 0});
  ASSERT_TRUE(second.ok()) << second.status();
  for (const Json& item : expected_["samples"]["items"]) {
    auto tokens = (*second)[0]->Sample(item["idx"].get<int64_t>());
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    EXPECT_EQ(std::vector<int64_t>(tokens->begin(), tokens->end()), item["tokens"].get<std::vector<int64_t>>());
  }
}

}  // namespace
}  // namespace conveyor
