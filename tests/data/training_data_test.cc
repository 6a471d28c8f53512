#include "data/training_data.h"

#include <string>
#include <vector>

#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace conveyor {
namespace {

using ::conveyor::testing::ReadJsonOrDie;
using ::conveyor::testing::SharedDataDir;
using ::conveyor::testing::TempDir;
using ::testing::HasSubstr;

std::string Fixtures() { return SharedDataDir() + "/megatron-fixtures"; }

// The fixture's settings as the flags give them.
Config FixtureFlags() {
  Config c;
  c.mutable_model()->set_seq_length(16);
  c.mutable_training()->set_seed(1234);
  c.mutable_data()->add_data_path(Fixtures() + "/tiny_uint16");
  c.mutable_data()->set_split("1,0,0");
  c.mutable_data()->set_tokenizer_type("GPT2BPETokenizer");
  c.mutable_data()->set_vocab_file(SharedDataDir() + "/gpt2/vocab.json");
  c.mutable_data()->set_merge_file(SharedDataDir() + "/gpt2/merges.txt");
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

TEST(TrainingDataTest, DataPathMatchesMegatronFixtureWithGpt2Tokenizer) {
  const JsonValue expected = ReadJsonOrDie(Fixtures() + "/gpt_tiny_uint16_seq16_seed1234_n40.json");
  Config c = FixtureFlags();
  auto tokenizer = ResolveVocabulary(&c);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_NE(*tokenizer, nullptr);
  EXPECT_EQ((*tokenizer)->eod(), 50256);
  EXPECT_EQ(c.model().vocab_size(), 50257);
  c.mutable_data()->set_data_cache_path(TempDir() + "/cache");
  auto data = BuildTrainingData(c, 40, 0, 0, /*build_cache_here=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->token_ids.vocab_size, 50257);
  ASSERT_NE(data->train, nullptr);
  EXPECT_EQ(data->valid, nullptr);
  EXPECT_EQ(data->test, nullptr);
  for (const JsonValue& item : expected["samples"]["items"].array()) {
    EXPECT_EQ(Tokens(*data->train, item["idx"].integer()), item["tokens"].IntArray());
  }
  // A second rank loads rank 0's cache and serves the same samples.
  auto other = BuildTrainingData(c, 40, 0, 0, /*build_cache_here=*/false);
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
  auto data = BuildTrainingData(c, 10, 0, 0, true);
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
  auto data = BuildTrainingData(c, 40, 8, 0, true);
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
  auto data = BuildTrainingData(c, 64, 16, 0, true);
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
    auto data = BuildTrainingData(c, 200, 0, 0, true);
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
  auto unresolved = BuildTrainingData(FixtureFlags(), 1, 0, 0, true);
  ASSERT_FALSE(unresolved.ok());
  EXPECT_THAT(unresolved.status().message(), HasSubstr("ResolveVocabulary"));

  c = FixtureConfig();
  c.mutable_data()->set_data_path(0, Fixtures() + "/missing");
  auto missing = BuildTrainingData(c, 1, 0, 0, true);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--data-path"));
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.idx"));

  // A zero train weight leaves nothing to train on (it used to leave a null split).
  c = FixtureConfig();
  c.mutable_data()->set_split("0,0,1");
  auto no_train = BuildTrainingData(c, 4, 0, 1, true);
  ASSERT_FALSE(no_train.ok());
  EXPECT_THAT(no_train.status().message(),
              HasSubstr("--split 0,0,1 gives the train split no share of --data-path"));

  c = FixtureConfig();
  c.mutable_training()->set_seed(-1);
  auto bad_seed = BuildTrainingData(c, 1, 0, 0, true);
  ASSERT_FALSE(bad_seed.ok());
  EXPECT_THAT(bad_seed.status().message(), HasSubstr("--seed"));

  c = FixtureConfig();
  c.mutable_data()->set_data_cache_path(TempDir() + "/empty_cache");
  TrainingDataOptions quick;
  quick.cache_timeout = absl::Milliseconds(20);
  auto waited = BuildTrainingData(c, 40, 0, 0, /*build_cache_here=*/false, quick);
  ASSERT_FALSE(waited.ok());
  EXPECT_THAT(waited.status().message(), HasSubstr("--data-cache-path"));
}

}  // namespace
}  // namespace conveyor
