// The ranks compare what they read before training (input_fingerprint.h): each rank
// here is a thread whose files lie in a folder of its own, standing for its node's
// storage. Copies of the same bytes at other paths agree; a stale dataset, another
// tokenizer file or other --load-hf weights on one node stop every rank, naming the
// ranks, the file and the contents each read.
#include "trainer/input_fingerprint.h"

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/indexed_dataset_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/config/flags.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;
using testing_util::FreshDir;
using testing_util::InProcessWorld;

Config Parse(const std::vector<std::string>& args) {
  absl::StatusOr<Config> config = ParseFlags(args);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// Each rank's verdict when rank r runs with configs[r].
std::vector<absl::Status> Agree(const std::vector<Config>& configs) {
  InProcessWorld world(int(configs.size()));
  return world.Run(
      [&](int rank, Communicator& comm) { return AgreeOnInputs(InputsOf(configs[rank]), comm); });
}

// A dataset of `documents` documents of three tokens each at `prefix`, the first token
// of the first document `first`.
void WriteDataset(const std::string& prefix, int documents, int first = 1) {
  auto builder = IndexedDatasetBuilder::Create(prefix + ".bin", TokenDType::kUint16);
  ASSERT_TRUE(builder.ok()) << builder.status();
  for (int d = 0; d < documents; ++d) {
    const std::vector<int32_t> tokens = {d == 0 ? first : 1, 2, 3};
    ASSERT_TRUE((*builder)->AddDocument(tokens, std::vector<int32_t>{3}).ok());
  }
  ASSERT_TRUE((*builder)->Finalize(prefix + ".idx").ok());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// One folder per node, each holding `corpus` (.bin/.idx); node `stale`'s differs.
std::vector<Config> DataRanks(const std::string& test, int ranks, int stale,
                              const std::function<void(const std::string&)>& make_stale) {
  std::vector<Config> configs;
  for (int r = 0; r < ranks; ++r) {
    const std::string node = FreshDir(absl::StrCat(test, "_node", r));
    WriteDataset(node + "/corpus", 4);
    if (r == stale) make_stale(node + "/corpus");
    configs.push_back(Parse({"--data-path", node + "/corpus"}));
  }
  return configs;
}

TEST(InputFingerprintTest, CopiesOfTheSameFilesAtOtherPathsAgree) {
  const std::vector<Config> configs = DataRanks("same_data", 3, -1, nullptr);
  EXPECT_THAT(Agree(configs), Each(absl::OkStatus()));
  const std::vector<RankInput> inputs = InputsOf(configs[0]);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].what, "--data-path dataset 1 of 1 (.idx)");
  EXPECT_THAT(inputs[0].contents, ::testing::StartsWith("4 sequences in 4 documents, "));
  EXPECT_EQ(inputs[1].what, "--data-path dataset 1 of 1 (.bin)");
  EXPECT_THAT(inputs[1].contents, ::testing::StartsWith("24 bytes, CRC32C "));
}

TEST(InputFingerprintTest, AStaleDatasetOnOneNodeStopsEveryRankNamingIt) {
  // Node 2 holds another version of the corpus: one token differs, sizes alike.
  const std::string test = "stale_data";
  const std::vector<Config> configs =
      DataRanks(test, 3, 2, [](const std::string& prefix) { WriteDataset(prefix, 4, 9); });
  const std::string node0 = configs[0].data().data_path(0);
  const std::string node2 = configs[2].data().data_path(0);
  for (const absl::Status& st : Agree(configs)) {
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("stopping before training: the ranks read different files, and "
                                "would train apart: --data-path dataset 1 of 1 (.bin): 24 bytes, "
                                "CRC32C "),
                      HasSubstr(" on ranks 0,1 (rank 0 reads " + node0 + ".bin), 24 bytes, "),
                      HasSubstr(" on rank 2 (rank 2 reads " + node2 +
                                ".bin). Every rank must "
                                "read the same bytes, whatever the path: give every node the "
                                "same copy"),
                      ::testing::Not(HasSubstr("(.idx)"))));
  }
}

TEST(InputFingerprintTest, AnIdxOfAnotherCorpusIsNamedWithItsCounts) {
  const std::vector<Config> configs =
      DataRanks("other_idx", 2, 1, [](const std::string& prefix) { WriteDataset(prefix, 6); });
  for (const absl::Status& st : Agree(configs)) {
    EXPECT_THAT(
        st.message(),
        AllOf(HasSubstr("--data-path dataset 1 of 1 (.idx): 4 sequences in 4 documents"),
              HasSubstr("on rank 0 (rank 0 reads "), HasSubstr(", 6 sequences in 6 documents, "),
              HasSubstr("--data-path dataset 1 of 1 (.bin): 24 bytes"), HasSubstr(", 36 bytes")));
  }
}

TEST(InputFingerprintTest, TokenizerFilesAreComparedByContentsNotPaths) {
  std::vector<Config> same, different;
  for (int r = 0; r < 2; ++r) {
    const std::string node = FreshDir(absl::StrCat("tokenizer_node", r));
    WriteText(node + "/vocab.json", "{\"a\": 0, \"b\": 1}");
    WriteText(node + "/merges.txt", r == 0 ? "#version: 0.2\na b\n" : "#version: 0.2\nb a\n");
    same.push_back(Parse({"--mock-data", "--vocab-file", node + "/vocab.json"}));
    different.push_back(Parse({"--mock-data", "--vocab-file", node + "/vocab.json", "--merge-file",
                               node + "/merges.txt"}));
  }
  EXPECT_THAT(Agree(same), Each(absl::OkStatus()));
  for (const absl::Status& st : Agree(different)) {
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("--merge-file: 18 bytes, CRC32C "), HasSubstr("/merges.txt)"),
                      ::testing::Not(HasSubstr("--vocab-file"))));
  }
}

TEST(InputFingerprintTest, AHuggingFaceTokenizerFolderIsComparedByItsFiles) {
  std::vector<Config> configs;
  for (int r = 0; r < 2; ++r) {
    const std::string node = FreshDir(absl::StrCat("tokenizer_folder_node", r));
    WriteText(node + "/tokenizer.json", "{\"model\": {}}");
    if (r == 1) WriteText(node + "/tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
    configs.push_back(Parse({"--mock-data", "--tokenizer-model", node}));
  }
  for (const absl::Status& st : Agree(configs)) {
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("--tokenizer-model tokenizer_config.json: cannot be read "
                                "(NOT_FOUND) on rank 0 (rank 0 reads "),
                      ::testing::Not(HasSubstr("--tokenizer-model tokenizer.json"))));
  }
}

// A model.safetensors with a 4-element norm and a `big`-element weight.
void WriteWeights(const std::string& dir, float norm, int64_t big) {
  HfTensorMap tensors;
  tensors["norm.weight"] = {{4}, {1, 1, 1, norm}};
  tensors["weight"] = {{big}, std::vector<float>(big, 0.5f)};
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
}

TEST(InputFingerprintTest, OtherLoadHfWeightsOnOneNodeStopEveryRank) {
  std::vector<Config> configs;
  for (int r = 0; r < 3; ++r) {
    const std::string node = FreshDir(absl::StrCat("hf_node", r));
    WriteWeights(node, r == 1 ? 2.0f : 1.0f, 16);
    configs.push_back(Parse({"--mock-data", "--load-hf", node}));
  }
  for (const absl::Status& st : Agree(configs)) {
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("--load-hf model.safetensors: "), HasSubstr(" on ranks 0,2 ("),
                      HasSubstr(" on rank 1 (rank 1 reads "), HasSubstr("/model.safetensors)")));
  }
  configs.pop_back();
  configs.erase(configs.begin() + 1);  // nodes 0 and 2: the same weights
  EXPECT_THAT(Agree(configs), Each(absl::OkStatus()));
}

}  // namespace
}  // namespace conveyor
