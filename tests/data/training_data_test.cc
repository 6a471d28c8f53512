#include "data/training_data.h"

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadJsonOrDie;
using ::conveyor::testing_util::TestDataDir;
using ::testing::HasSubstr;

std::string Fixtures() { return TestDataDir() + "/megatron-fixtures"; }

// The fixture's settings as the flags give them.
Config FixtureFlags() {
  Config c;
  c.mutable_model()->set_seq_length(16);
  c.mutable_training()->set_seed(1234);
  c.mutable_data()->add_data_path(Fixtures() + "/tiny_uint16");
  c.mutable_data()->set_split("1,0,0");
  c.mutable_data()->set_tokenizer_type("GPT2BPETokenizer");
  c.mutable_data()->set_vocab_file(TestDataDir() + "/gpt2/vocab.json");
  c.mutable_data()->set_merge_file(TestDataDir() + "/gpt2/merges.txt");
  return c;
}

// The same after ResolveVocabulary, as BuildTrainingData takes it.
Config FixtureConfig() {
  Config c = FixtureFlags();
  const absl::Status resolved = ResolveVocabulary(&c).status();
  EXPECT_TRUE(resolved.ok()) << resolved;
  return c;
}

std::vector<int64_t> Tokens(const SampleSource& s, int64_t i) {
  auto t = s.Sample(i);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::vector<int64_t>(t->begin(), t->end()) : std::vector<int64_t>{};
}

TEST(TrainingDataTest, SampleCountsAsMegatron) {
  // 100 iterations of 8, validation every 30 for 5 iterations:
  // valid = (100 / 30 + 1) * 5 * 8 = 160, test = 5 * 8 = 40.
  SplitSampleCounts c = MegatronSampleCounts(100, 8, 30, 5);
  EXPECT_EQ(c.train, 800);
  EXPECT_EQ(c.valid, 160);
  EXPECT_EQ(c.test, 40);
}

TEST(TrainingDataTest, SampleCountsSaturateInsteadOfOverflowing) {
  // (2e9 / 1 + 1) * 2e9 * 2e9 is far past int64.
  SplitSampleCounts c = MegatronSampleCounts(2000000000, 2000000000, 1, 2000000000);
  EXPECT_EQ(c.train, int64_t{4000000000000000000});
  EXPECT_EQ(c.valid, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(c.test, int64_t{4000000000000000000});
}

// Indices too large for memory are refused before anything is allocated (it
// used to end in std::bad_alloc), with the sizes, the flags and the fix.
TEST(TrainingDataTest, IndicesTooLargeForMemoryNameSizesFlagsAndFix) {
  const std::string prefix = Fixtures() + "/tiny_uint16";
  // 1e12 samples: 49535603716 epochs of the fixture's 7 documents, 323 tokens.
  auto huge = BuildTrainingData(FixtureConfig(), 1000000000000, 0, 0);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(huge.status().message(),
              HasSubstr("--data-path " + prefix +
                        " (train split): the indices of 1000000000016 samples (49535603716 "
                        "epochs of 7 documents: document index 1291.7 GiB, sample index 14901.2 "
                        "GiB, shuffle index 7450.6 GiB) need 23643.5 GiB of host memory, but "
                        "this process may use "));
  EXPECT_THAT(huge.status().message(),
              HasSubstr("; the train split's sample count is --train-iters * "
                        "--global-batch-size (or --train-samples): lower it, or run where this "
                        "process may use more memory"));

  // The validation split names its own flags; a count past int64 tokens too.
  Config with_valid = FixtureConfig();
  with_valid.mutable_data()->set_split("1,1,0");
  auto overflow = BuildTrainingData(with_valid, 40, std::numeric_limits<int64_t>::max(), 0);
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(overflow.status().message(),
              HasSubstr("(valid split): 9223372036854775807 samples of 17 tokens are more "
                        "tokens than a 64-bit count holds; the valid split's sample count is "
                        "(--train-iters / --eval-interval + 1) * --eval-iters * "
                        "--global-batch-size: lower it"));

  // A weighted blend: each part is checked before the blend is built.
  Config blend = FixtureConfig();
  blend.mutable_data()->clear_data_path();
  for (const std::string& word : {std::string("1"), prefix, std::string("3"), prefix}) {
    blend.mutable_data()->add_data_path(word);
  }
  auto blended = BuildTrainingData(blend, 1000000000000, 0, 0);
  ASSERT_FALSE(blended.ok());
  EXPECT_EQ(blended.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(blended.status().message(), HasSubstr(" GiB of host memory"));
  EXPECT_THAT(blended.status().message(), HasSubstr("--train-iters * --global-batch-size"));
}

// A prefix is taken whole, spaces and all; weights are the numbers.
TEST(TrainingDataTest, PrefixesWithSpacesAreTakenWhole) {
  const std::string dir = FreshDir("training_data") + "/my data";
  std::filesystem::create_directories(dir);
  for (const char* ext : {".bin", ".idx"}) {
    std::filesystem::copy_file(Fixtures() + "/tiny_uint16" + ext, dir + "/tiny_uint16" + ext);
  }
  Config c = FixtureConfig();
  c.mutable_data()->set_data_path(0, dir + "/tiny_uint16");
  auto one = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->train->size(), 40);

  c.mutable_data()->clear_data_path();
  for (const std::string& word : {std::string("0.3"), dir + "/tiny_uint16", std::string("0.7"),
                                  Fixtures() + "/tiny_uint16"}) {
    c.mutable_data()->add_data_path(word);
  }
  auto blend = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(blend.ok()) << blend.status();
  const auto& blended = dynamic_cast<const BlendedDataset&>(*blend->train);
  EXPECT_EQ(blended.num_datasets(), 2);
  EXPECT_DOUBLE_EQ(blended.weights()[0], 0.3);
}

TEST(TrainingDataTest, DataPathMatchesMegatronFixtureWithGpt2Tokenizer) {
  const Json expected = ReadJsonOrDie(Fixtures() + "/gpt_tiny_uint16_seq16_seed1234_n40.json");
  Config c = FixtureFlags();
  auto tokenizer = ResolveVocabulary(&c);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_NE(*tokenizer, nullptr);
  EXPECT_EQ((*tokenizer)->eod(), 50256);
  EXPECT_EQ(c.model().vocab_size(), 50257);
  c.mutable_data()->set_data_cache_path(FreshDir("training_data") + "/cache");
  auto data = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->token_ids.vocab_size, 50257);
  ASSERT_NE(data->train, nullptr);
  EXPECT_EQ(data->valid, nullptr);
  EXPECT_EQ(data->test, nullptr);
  for (const Json& item : expected["samples"]["items"]) {
    EXPECT_EQ(Tokens(*data->train, item["idx"].get<int64_t>()), item["tokens"].get<std::vector<int64_t>>());
  }
  // A second rank finds the first one's cache, loads it and serves the same samples.
  auto other = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(other.ok()) << other.status();
  for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(Tokens(*other->train, i), Tokens(*data->train, i));
}

TEST(TrainingDataTest, WeightedDataPathBlends) {
  Config c = FixtureConfig();
  c.mutable_data()->clear_data_path();
  for (const char* w : {"1", "3"}) {
    c.mutable_data()->add_data_path(w);
    c.mutable_data()->add_data_path(Fixtures() + "/tiny_uint16");
  }
  auto data = BuildTrainingData(c, 10, 0, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  const auto* blend = dynamic_cast<const BlendedDataset*>(data->train.get());
  ASSERT_NE(blend, nullptr);
  EXPECT_EQ(blend->size(), 11);  // ceil(2.5) + ceil(7.5)
}

TEST(TrainingDataTest, SeparatePathsAndSplitSizes) {
  Config c = FixtureConfig();
  c.mutable_data()->clear_data_path();
  c.mutable_data()->add_train_data_path(Fixtures() + "/tiny_uint16");
  c.mutable_data()->add_valid_data_path(Fixtures() + "/tiny_uint16");
  auto data = BuildTrainingData(c, 40, 8, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->train, nullptr);
  ASSERT_NE(data->valid, nullptr);
  EXPECT_EQ(data->test, nullptr);
  EXPECT_EQ(data->train->size(), 40);
  EXPECT_EQ(data->valid->size(), 20);  // one epoch: (323 - 1) / 16
}

TEST(TrainingDataTest, MockDataPerSplit) {
  Config c;
  c.mutable_model()->set_seq_length(8);
  c.mutable_model()->set_vocab_size(100);
  c.mutable_training()->set_seed(7);
  c.mutable_data()->set_mock_data(true);
  auto data = BuildTrainingData(c, 64, 16, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->token_ids.vocab_size, 100);
  ASSERT_NE(data->train, nullptr);
  ASSERT_NE(data->valid, nullptr);
  EXPECT_EQ(data->test, nullptr);
  EXPECT_EQ(data->train->size(), 64);
  EXPECT_EQ(data->valid->size(), 16);
  int same = 0;
  for (int64_t i = 0; i < 16; ++i) {
    const std::vector<int64_t> t = Tokens(*data->train, i);
    ASSERT_EQ(t.size(), 9u);
    for (int64_t id : t) ASSERT_LT(id, 100);
    same += t == Tokens(*data->valid, i);
  }
  EXPECT_LT(same, 2);  // the splits are different streams
}

// The vocabulary ResolveVocabulary puts in the config, with the tokenizer's eod
// inside it, and the data built from that config uses exactly it.
TEST(TrainingDataTest, TokenizersAndVocabSizes) {
  struct Case {
    const char* tokenizer;
    int32_t flag_vocab_size;
    int64_t vocab_size;
    int32_t eod;  // -1: no tokenizer
  };
  const Case cases[] = {
      {"ByteTokenizer", 0, 257, 256},
      {"NullTokenizer", 1000, 1001, 1000},  // ids below 1000, eod 1000, as Megatron
      {"", 100, 100, -1},
  };
  for (const Case& want : cases) {
    SCOPED_TRACE(want.tokenizer);
    Config c;
    c.mutable_model()->set_seq_length(8);
    c.mutable_data()->set_mock_data(true);
    c.mutable_data()->set_tokenizer_type(want.tokenizer);
    c.mutable_model()->set_vocab_size(want.flag_vocab_size);
    auto tokenizer = ResolveVocabulary(&c);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    EXPECT_EQ(c.model().vocab_size(), want.vocab_size);
    EXPECT_EQ(*tokenizer == nullptr ? -1 : (*tokenizer)->eod(), want.eod);
    if (*tokenizer != nullptr) {
      EXPECT_EQ((*tokenizer)->vocab_size(), want.vocab_size);
    }
    auto data = BuildTrainingData(c, 200, 0, 0);
    ASSERT_TRUE(data.ok()) << data.status();
    // Not NullTokenizer rebuilt from the resolved size (1002 ids, eod 1001).
    EXPECT_EQ(data->token_ids.vocab_size, want.vocab_size);
    for (int64_t i = 0; i < 200; ++i) {
      for (int64_t id : Tokens(*data->train, i)) ASSERT_LT(id, want.vocab_size);
    }
  }
}

TEST(TrainingDataTest, ErrorsNameFlagsAndFiles) {
  Config c = FixtureFlags();
  c.mutable_data()->clear_merge_file();
  auto no_merges = ResolveVocabulary(&c);
  ASSERT_FALSE(no_merges.ok());
  EXPECT_THAT(no_merges.status().message(), HasSubstr("--merge-file"));

  c = FixtureFlags();
  c.mutable_data()->set_vocab_file("/nonexistent/vocab.json");
  auto bad_vocab = ResolveVocabulary(&c);
  ASSERT_FALSE(bad_vocab.ok());
  EXPECT_THAT(bad_vocab.status().message(), HasSubstr("/nonexistent/vocab.json"));

  c = FixtureFlags();
  c.mutable_data()->set_tokenizer_type("SentencePiece");
  auto unknown = ResolveVocabulary(&c);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("--tokenizer-type SentencePiece"));

  Config mock;
  mock.mutable_data()->set_mock_data(true);
  auto no_vocab = ResolveVocabulary(&mock);
  ASSERT_FALSE(no_vocab.ok());
  EXPECT_THAT(no_vocab.status().message(),
              HasSubstr("--vocab-size 0 must be positive without --tokenizer-type"));
  // A config whose vocabulary was never resolved is refused, not built with none.
  auto unresolved = BuildTrainingData(FixtureFlags(), 1, 0, 0);
  ASSERT_FALSE(unresolved.ok());
  EXPECT_THAT(unresolved.status().message(), HasSubstr("ResolveVocabulary"));

  c = FixtureConfig();
  c.mutable_data()->set_data_path(0, Fixtures() + "/missing");
  auto missing = BuildTrainingData(c, 1, 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--data-path"));
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.idx"));

  // A zero train weight leaves nothing to train on (it used to leave a null split).
  c = FixtureConfig();
  c.mutable_data()->set_split("0,0,1");
  auto no_train = BuildTrainingData(c, 4, 0, 1);
  ASSERT_FALSE(no_train.ok());
  EXPECT_THAT(no_train.status().message(),
              HasSubstr("--split 0,0,1 gives the train split no share of --data-path"));

  c = FixtureConfig();
  c.mutable_training()->set_seed(-1);
  auto bad_seed = BuildTrainingData(c, 1, 0, 0);
  ASSERT_FALSE(bad_seed.ok());
  EXPECT_THAT(bad_seed.status().message(), HasSubstr("--seed"));
}

}  // namespace
}  // namespace conveyor
