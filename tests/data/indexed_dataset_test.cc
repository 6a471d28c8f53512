#include "data/indexed_dataset.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/indexed_dataset_builder.h"
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

std::string FixturePrefix() { return TestDataDir() + "/megatron-fixtures/tiny_uint16"; }

void WriteFile(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

TEST(IndexedDatasetTest, ReadsMegatronFixtureExactly) {
  const Json expected = ReadJsonOrDie(FixturePrefix() + ".json");
  absl::StatusOr<std::unique_ptr<IndexedDataset>> ds = IndexedDataset::Open(FixturePrefix());
  ASSERT_TRUE(ds.ok()) << ds.status();
  const IndexedDataset& d = **ds;
  EXPECT_EQ(int(d.dtype()), expected["header"]["dtype_code"].get<int64_t>());
  EXPECT_EQ(d.num_sequences(), expected["num_sequences"].get<int64_t>());
  EXPECT_EQ(d.num_documents(), expected["num_documents"].get<int64_t>());
  EXPECT_EQ(d.num_tokens(), expected["total_tokens"].get<int64_t>());
  std::vector<int64_t> lengths(d.sequence_lengths().begin(), d.sequence_lengths().end());
  EXPECT_EQ(lengths, expected["sequence_lengths"].get<std::vector<int64_t>>());
  EXPECT_EQ(d.sequence_pointers(), expected["sequence_pointers_bytes"].get<std::vector<int64_t>>());
  EXPECT_EQ(d.document_indices(), expected["document_indices"].get<std::vector<int64_t>>());

  const Json& docs = expected["documents"];
  ASSERT_EQ(docs.size(), 7u);
  for (size_t k = 0; k < docs.size(); ++k) {
    const std::vector<int64_t> ids = docs[k]["sequence_ids"].get<std::vector<int64_t>>();
    for (size_t s = 0; s < ids.size(); ++s) {
      absl::StatusOr<std::vector<int64_t>> tokens = d.Get(ids[s]);
      ASSERT_TRUE(tokens.ok()) << tokens.status();
      EXPECT_EQ(*tokens, docs[k]["sequences"][s].get<std::vector<int64_t>>()) << "document " << k;
    }
  }
}

TEST(IndexedDatasetTest, PartialReadsMatchFixture) {
  const Json expected = ReadJsonOrDie(FixturePrefix() + ".json");
  auto ds = IndexedDataset::Open(FixturePrefix());
  ASSERT_TRUE(ds.ok()) << ds.status();
  const Json& reads = expected["partial_reads"];
  ASSERT_EQ(reads.size(), 6u);  // every sequence with at least 3 tokens
  for (const Json& r : reads) {
    auto part = (*ds)->Get(r["sequence"].get<int64_t>(), r["offset"].get<int64_t>(), r["length"].get<int64_t>());
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(*part, r["tokens"].get<std::vector<int64_t>>()) << "sequence " << r["sequence"].get<int64_t>();
  }
  EXPECT_FALSE((*ds)->Get(0, 0, 2).ok());
  EXPECT_FALSE((*ds)->Get(7).ok());
}

TEST(IndexedDatasetTest, BuilderWritesMegatronBytes) {
  const Json expected = ReadJsonOrDie(FixturePrefix() + ".json");
  const std::string prefix = FreshDir("indexed_dataset") + "/copy";
  auto builder = IndexedDatasetBuilder::Create(prefix + ".bin", TokenDType::kUint16);
  ASSERT_TRUE(builder.ok()) << builder.status();
  for (const Json& doc : expected["documents"]) {
    const std::vector<int64_t> tokens = doc["sequences"][0].get<std::vector<int64_t>>();
    const std::vector<int32_t> lengths = {int32_t(tokens.size())};
    ASSERT_TRUE((*builder)->AddDocument(absl::MakeConstSpan(tokens), lengths).ok());
  }
  ASSERT_TRUE((*builder)->Finalize(prefix + ".idx").ok());
  EXPECT_EQ(ReadFileOrDie(prefix + ".bin"), ReadFileOrDie(FixturePrefix() + ".bin"));
  EXPECT_EQ(ReadFileOrDie(prefix + ".idx"), ReadFileOrDie(FixturePrefix() + ".idx"));
}

TEST(IndexedDatasetTest, RoundTripsEveryDtypeAndMultiSequenceDocuments) {
  for (uint8_t code = 1; code <= 8; ++code) {
    const TokenDType dtype = *TokenDTypeFromCode(code);
    const std::string prefix = FreshDir("indexed_dataset") + "/rt";
    auto builder = IndexedDatasetBuilder::Create(prefix + ".bin", dtype);
    ASSERT_TRUE(builder.ok());
    const std::vector<int64_t> doc0 = {1, 2, 3, 4, 5, 6};
    const std::vector<int64_t> doc1 = {7, 8, 9};
    const std::vector<int32_t> lengths0 = {2, 4};
    ASSERT_TRUE((*builder)->AddDocument(absl::MakeConstSpan(doc0), lengths0).ok());
    ASSERT_TRUE((*builder)->AddItem(absl::MakeConstSpan(doc1)).ok());
    (*builder)->EndDocument();
    ASSERT_TRUE((*builder)->Finalize(prefix + ".idx").ok());

    auto ds = IndexedDataset::Open(prefix);
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->dtype(), dtype);
    EXPECT_EQ((*ds)->num_sequences(), 3);
    EXPECT_EQ((*ds)->num_documents(), 2);
    EXPECT_EQ((*ds)->document_indices(), (std::vector<int64_t>{0, 2, 3}));
    const int64_t item = TokenDTypeSize(dtype);
    EXPECT_EQ((*ds)->sequence_pointers(), (std::vector<int64_t>{0, 2 * item, 6 * item}));
    EXPECT_EQ(*(*ds)->Get(0), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(*(*ds)->Get(1), (std::vector<int64_t>{3, 4, 5, 6}));
    EXPECT_EQ(*(*ds)->Get(2), doc1);
    EXPECT_EQ(ReadFileOrDie(prefix + ".bin").size(), size_t(9 * item));
  }
}

TEST(IndexedDatasetTest, BuilderRejectsLengthMismatch) {
  auto builder =
      IndexedDatasetBuilder::Create(FreshDir("indexed_dataset") + "/x.bin", TokenDType::kInt32);
  ASSERT_TRUE(builder.ok());
  const std::vector<int64_t> tokens = {1, 2, 3};
  const std::vector<int32_t> lengths = {2};
  EXPECT_FALSE((*builder)->AddDocument(absl::MakeConstSpan(tokens), lengths).ok());
}

// Corrupts a copy of the fixture and checks that opening it fails with a
// message naming the file and containing `problem`.
void ExpectOpenFails(const std::string& idx, const std::string& bin, const std::string& bad_file,
                     const std::string& problem) {
  const std::string prefix = FreshDir("indexed_dataset") + "/bad";
  WriteFile(prefix + ".idx", idx);
  WriteFile(prefix + ".bin", bin);
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_FALSE(ds.ok());
  const std::string msg(ds.status().message());
  EXPECT_NE(msg.find(prefix + bad_file), std::string::npos) << msg;
  EXPECT_NE(msg.find(problem), std::string::npos) << msg;
}

TEST(IndexedDatasetTest, ClearErrorsForBadFiles) {
  const std::string idx = ReadFileOrDie(FixturePrefix() + ".idx");
  const std::string bin = ReadFileOrDie(FixturePrefix() + ".bin");

  std::string bad_magic = idx;
  bad_magic[0] = 'X';
  ExpectOpenFails(bad_magic, bin, ".idx", "bad magic");

  std::string bad_version = idx;
  bad_version[9] = 2;
  ExpectOpenFails(bad_version, bin, ".idx", "version 2");

  std::string bad_dtype = idx;
  bad_dtype[17] = 9;
  ExpectOpenFails(bad_dtype, bin, ".idx", "dtype code 9");

  ExpectOpenFails(idx.substr(0, 20), bin, ".idx", "truncated header");
  ExpectOpenFails(idx.substr(0, idx.size() - 8), bin, ".idx", "truncated");
  ExpectOpenFails(idx + "xx", bin, ".idx", "size mismatch");
  ExpectOpenFails(idx, bin.substr(0, bin.size() - 2), ".bin", "past the end");

  const std::string prefix = FreshDir("indexed_dataset") + "/noidx";
  auto missing = IndexedDataset::Open(prefix);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(std::string(missing.status().message()).find(prefix + ".idx"), std::string::npos);
}

// The .idx of a shorter corpus beside a longer .bin used to open and train on the
// .bin's first tokens: the .idx must account for every byte of the .bin, end to end.
TEST(IndexedDatasetTest, AnIdxThatDoesNotTileItsBinIsRefusedNamingBothFiles) {
  const std::string idx = ReadFileOrDie(FixturePrefix() + ".idx");
  const std::string bin = ReadFileOrDie(FixturePrefix() + ".bin");
  const std::string prefix = FreshDir("indexed_dataset") + "/bad";
  int64_t n = 0;  // the fixture's sequence count (u64 at byte 18)
  std::memcpy(&n, idx.data() + 18, sizeof(n));
  auto open_with = [&](const std::string& idx_bytes, const std::string& bin_bytes) {
    WriteFile(prefix + ".idx", idx_bytes);
    WriteFile(prefix + ".bin", bin_bytes);
    return IndexedDataset::Open(prefix);
  };
  auto longer = open_with(idx, bin + std::string(6, '\0'));
  ASSERT_FALSE(longer.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(longer.status())) << longer.status();
  EXPECT_EQ(longer.status().message(),
            absl::StrCat(prefix, ".idx does not describe ", prefix, ".bin: its ", n,
                         " sequences of ", "uint16 tokens take ", bin.size(), " bytes but ", prefix,
                         ".bin holds ", bin.size() + 6,
                         " (an .idx of another corpus or a stale copy beside this .bin); "
                         "rebuild the pair with preprocess, or copy the .idx that was written "
                         "with this .bin"));
  // The same bytes in all, but the second sequence starts 2 bytes late: a gap.
  std::string gap = idx;
  gap[kIndexHeaderBytes + 4 * n + 8] += 2;  // the low byte of the second pointer
  auto gapped = open_with(gap, bin + std::string(2, '\0'));
  ASSERT_FALSE(gapped.ok());
  EXPECT_THAT(std::string(gapped.status().message()),
              ::testing::HasSubstr(absl::StrCat(prefix, ".idx does not describe ", prefix,
                                                ".bin: sequence 1 starts at byte ")));
  ASSERT_TRUE(open_with(idx, bin).ok());
}

// A directory where a file belongs used to say "No such device" (mmap's ENODEV).
TEST(IndexedDatasetTest, ADirectoryIsNamedWithWhatIsExpected) {
  const std::string dir = FreshDir("indexed_dataset");
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/a/x.idx"));
  auto idx_dir = IndexedDataset::Open(dir + "/a/x");
  ASSERT_FALSE(idx_dir.ok());
  EXPECT_EQ(idx_dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(idx_dir.status().message(),
            dir +
                "/a/x.idx is a directory, not a file: a dataset is the prefix of a .bin/.idx "
                "pair of files, PREFIX.bin and PREFIX.idx");
  // A good .idx beside a directory for the .bin.
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/b/x.bin"));
  std::filesystem::copy_file(FixturePrefix() + ".idx", dir + "/b/x.idx");
  auto bin_dir = IndexedDataset::Open(dir + "/b/x");
  ASSERT_FALSE(bin_dir.ok());
  EXPECT_EQ(bin_dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bin_dir.status().message(),
            dir +
                "/b/x.bin is a directory, not a file: a dataset is the prefix of a .bin/.idx "
                "pair of files, PREFIX.bin and PREFIX.idx");

  // The prefix itself a directory: the error offers a dataset found in it.
  const std::string folder = dir + "/corpus";
  ASSERT_TRUE(std::filesystem::create_directories(folder));
  EXPECT_EQ(CheckDatasetPrefix(folder, "--data-path").message(),
            "--data-path " + folder +
                " is a directory: --data-path takes a dataset's prefix, the path of its .bin/.idx "
                "pair without the extension, and " +
                folder + " holds no .idx file");
  for (const char* ext : {".bin", ".idx"}) {
    std::filesystem::copy_file(FixturePrefix() + ext, folder + "/web_text_document" + ext);
  }
  EXPECT_EQ(CheckDatasetPrefix(folder, "--data-path").message(),
            "--data-path " + folder +
                " is a directory: --data-path takes a dataset's prefix, the path of its .bin/.idx "
                "pair without the extension, e.g. --data-path " +
                folder + "/web_text_document (" + folder + " holds 1 dataset)");
  EXPECT_TRUE(CheckDatasetPrefix(folder + "/web_text_document", "--data-path").ok());
}

}  // namespace
}  // namespace conveyor
