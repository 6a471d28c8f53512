#include "data/gpt_dataset.h"

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::ReadJsonOrDie;
using ::conveyor::testing_util::TestDataDir;

class GptDatasetFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = TestDataDir() + "/megatron-fixtures";
    expected_ = ReadJsonOrDie(dir + "/gpt_tiny_uint16_seq16_seed1234_n40.json");
    auto ds = IndexedDataset::Open(dir + "/tiny_uint16");
    ASSERT_TRUE(ds.ok()) << ds.status();
    GptIndexConfig config;
    config.sequence_length = expected_["config"]["sequence_length"].get<int64_t>();
    config.random_seed = uint32_t(expected_["config"]["random_seed"].get<int64_t>());
    config.num_samples = expected_["num_samples_requested"].get<int64_t>();
    std::vector<int32_t> documents;
    for (int64_t d : expected_["indexed_indices"].get<std::vector<int64_t>>()) documents.push_back(int32_t(d));
    auto gpt = GptDataset::Create(std::shared_ptr<const IndexedDataset>(std::move(*ds)), documents,
                                  config, /*token_ids=*/{});
    ASSERT_TRUE(gpt.ok()) << gpt.status();
    dataset_ = std::move(*gpt);
  }

  Json expected_;
  std::unique_ptr<GptDataset> dataset_;
};

TEST_F(GptDatasetFixtureTest, DerivedValuesMatchMegatron) {
  const GptIndices& idx = dataset_->indices();
  const Json& derived = expected_["derived"];
  EXPECT_EQ(idx.tokens_per_epoch, derived["num_tokens_per_epoch"].get<int64_t>());
  EXPECT_EQ(idx.num_epochs, derived["num_epochs"].get<int64_t>());
  EXPECT_EQ(idx.separate_final_epoch, derived["separate_final_epoch"].get<bool>());
  EXPECT_EQ(dataset_->size(), derived["len_dataset"].get<int64_t>());
}

TEST_F(GptDatasetFixtureTest, IndicesMatchMegatron) {
  testing_util::ExpectIndicesMatchFixture(dataset_->indices(), expected_);
}

TEST_F(GptDatasetFixtureTest, EverySampleMatchesMegatron) {
  const Json& items = expected_["samples"]["items"];
  ASSERT_EQ(items.size(), 40u);
  for (const Json& item : items) {
    auto tokens = dataset_->Sample(item["idx"].get<int64_t>());
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    std::vector<int64_t> got(tokens->begin(), tokens->end());
    EXPECT_EQ(got, item["tokens"].get<std::vector<int64_t>>()) << "sample " << item["idx"].get<int64_t>();
  }
  const Json& unshuffled = expected_["samples_unshuffled"]["tokens"];
  ASSERT_EQ(unshuffled.size(), 40u);
  for (size_t row = 0; row < unshuffled.size(); ++row) {
    auto tokens = dataset_->UnshuffledSample(int64_t(row));
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    std::vector<int64_t> got(tokens->begin(), tokens->end());
    EXPECT_EQ(got, unshuffled[row].get<std::vector<int64_t>>()) << "row " << row;
  }
}

TEST_F(GptDatasetFixtureTest, IndexWrapsAround) {
  EXPECT_EQ(*dataset_->Sample(3), *dataset_->Sample(43));
  EXPECT_EQ(*dataset_->Sample(39), *dataset_->Sample(-1));
}

TEST(GptIndicesTest, SeparateFinalEpochShufflesItAlone) {
  // 10 documents of 10 tokens, 8-token samples: (100-1)/8 = 12 per epoch.
  // Asking for 14 needs 2 epochs and takes only 2 samples from the second
  // (< 0.8 * 12), so the last epoch is shuffled on its own.
  std::vector<int32_t> lengths(10, 10);
  std::vector<int32_t> documents(10);
  std::iota(documents.begin(), documents.end(), 0);
  GptIndexConfig config;
  config.sequence_length = 8;
  config.random_seed = 5;
  config.num_samples = 14;
  auto idx = BuildGptIndices(lengths, documents, config);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->num_epochs, 2);
  EXPECT_TRUE(idx->separate_final_epoch);
  ASSERT_EQ(idx->document_index.size(), 20u);
  // Each half is a permutation of the documents on its own.
  for (int half = 0; half < 2; ++half) {
    std::vector<int32_t> part(idx->document_index.begin() + 10 * half,
                              idx->document_index.begin() + 10 * (half + 1));
    std::sort(part.begin(), part.end());
    EXPECT_EQ(part, documents);
  }
  // (2*100 - 1) / 8 = 24 samples; the first 12 shuffled among themselves.
  ASSERT_EQ(idx->num_samples(), 24);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(idx->shuffle_index[i] < 12, i < 12);
}

TEST(GptIndicesTest, RejectsBadConfig) {
  std::vector<int32_t> lengths = {5};
  std::vector<int32_t> documents = {0};
  GptIndexConfig config;
  EXPECT_FALSE(BuildGptIndices(lengths, documents, config).ok());  // seq 0
  config.sequence_length = 4;
  std::vector<int32_t> bad_documents = {3};
  EXPECT_FALSE(BuildGptIndices(lengths, bad_documents, config).ok());
}

}  // namespace
}  // namespace conveyor
