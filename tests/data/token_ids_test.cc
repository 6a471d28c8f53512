// Token ids outside the model's vocabulary never reach a micro-batch: every
// sample read from a file is checked as it is read, and the error names the
// file, the id, the vocabulary and the fix. Also the other data errors a user
// meets first: a .bin/.idx path where a prefix belongs, an empty dataset.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/indexed_dataset_builder.h"
#include "data/token_id_limit.h"
#include "data/training_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::TestDataDir;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Fixture() { return TestDataDir() + "/megatron-fixtures/tiny_uint16"; }
// The largest id in tiny_uint16 (323 draws from randint(0, 50257)).
constexpr int kFixtureLargestId = 49966;

// Writes `docs` (one sequence each) as prefix.bin/.idx with the project's writer.
std::string WriteDataset(const std::string& prefix, const std::vector<std::vector<int64_t>>& docs,
                         TokenDType dtype = TokenDType::kUint16) {
  auto builder = IndexedDatasetBuilder::Create(prefix + ".bin", dtype);
  EXPECT_TRUE(builder.ok()) << builder.status();
  for (const std::vector<int64_t>& d : docs) {
    EXPECT_TRUE((*builder)->AddDocument(d, {int32_t(d.size())}).ok());
  }
  EXPECT_TRUE((*builder)->Finalize(prefix + ".idx").ok());
  return prefix;
}

// 40 documents of 3..22 in-range ids below 100, with `bad` ids planted:
// {document, position, id}.
struct Planted {
  int doc, pos;
  int64_t id;
};
std::vector<std::vector<int64_t>> Documents(const std::vector<Planted>& bad) {
  std::vector<std::vector<int64_t>> docs;
  for (int d = 0; d < 40; ++d) {
    std::vector<int64_t> doc(3 + (d * 7) % 20);
    for (size_t k = 0; k < doc.size(); ++k) doc[k] = (d * 31 + int64_t(k) * 17) % 100;
    docs.push_back(doc);
  }
  for (const Planted& p : bad) docs[p.doc][p.pos] = p.id;
  return docs;
}

Config FixtureConfig(const std::string& prefix) {
  Config c;
  c.mutable_model()->set_seq_length(16);
  c.mutable_training()->set_seed(1234);
  c.mutable_data()->add_data_path(prefix);
  c.mutable_data()->set_split("1,0,0");
  return c;
}

// The build's status, else that of the first of the train split's first `n`
// samples that fails: what a run reading them would meet.
absl::Status FirstError(const absl::StatusOr<DataSplits>& data, int64_t n) {
  if (!data.ok()) return data.status();
  for (int64_t i = 0; i < n; ++i) {
    if (absl::Status st = data->train->Sample(i).status(); !st.ok()) return st;
  }
  return absl::OkStatus();
}

TEST(TokenIdLimitTest, FindsTheFirstIdOutside) {
  TokenIdLimit limit;
  const std::vector<int32_t> ids = {0, 5, 9, 10, 3, -1};
  EXPECT_EQ(FirstTokenIdOutside(ids, limit), std::nullopt);  // disabled
  limit.vocab_size = 10;
  EXPECT_EQ(FirstTokenIdOutside(ids, limit), 3u);  // 10 is not below 10
  limit.vocab_size = 11;
  EXPECT_EQ(FirstTokenIdOutside(ids, limit), 5u);  // negative
  EXPECT_EQ(FirstTokenIdOutside(std::vector<int32_t>{0, 10}, limit), std::nullopt);
  EXPECT_EQ(FirstTokenIdOutside(std::vector<int32_t>{}, limit), std::nullopt);
}

// The central property: a sample is refused exactly when it holds an id the
// model has no row for, and every other sample is served unchanged.
TEST(TokenIdsTest, EverySampleWithAnIdOutsideIsRefusedAndNoOther) {
  const std::string prefix = WriteDataset(FreshDir("token_ids") + "/planted",
                                          Documents({{17, 2, 100}, {23, 0, 250}, {31, 5, 99}}));
  auto opened = IndexedDataset::Open(prefix);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<const IndexedDataset> ds = *std::move(opened);
  std::vector<int32_t> docs(ds->num_sequences());
  for (size_t i = 0; i < docs.size(); ++i) docs[i] = int32_t(i);
  GptIndexConfig config;
  config.sequence_length = 16;
  config.random_seed = 1234;
  config.num_samples = 200;  // several epochs
  auto plain = GptDataset::Create(ds, docs, config, /*token_ids=*/{});
  auto checked =
      GptDataset::Create(ds, docs, config, {{/*vocab_size=*/100, ""}, "--data-path " + prefix});
  ASSERT_TRUE(plain.ok() && checked.ok());

  int refused = 0;
  for (int64_t i = 0; i < (*plain)->size(); ++i) {
    auto tokens = (*plain)->Sample(i);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    auto first_bad =
        std::find_if(tokens->begin(), tokens->end(), [](int32_t t) { return t >= 100; });
    auto got = (*checked)->Sample(i);
    if (first_bad == tokens->end()) {
      ASSERT_TRUE(got.ok()) << "sample " << i << ": " << got.status();
      EXPECT_EQ(*got, *tokens) << "sample " << i;
      continue;
    }
    ++refused;
    ASSERT_FALSE(got.ok()) << "sample " << i << " holds id " << *first_bad << " but was served";
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(got.status().message());
    EXPECT_THAT(message, HasSubstr("--data-path " + prefix + ": sequence "));
    EXPECT_THAT(message, HasSubstr(absl::StrCat("holds token id ", *first_bad)));
    EXPECT_THAT(message, HasSubstr("vocabulary of 100 ids"));
    // The whole (small) file was scanned: the fix covers its largest id.
    EXPECT_THAT(message, HasSubstr("the data holds id 250; pass --vocab-size 251"));
  }
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, (*plain)->size());
}

TEST(TokenIdsTest, ErrorNamesTheSequenceOfTheBadToken) {
  // Only sequence 0's token 4 is bad; a long sequence so that one sample
  // starts inside it.
  std::vector<int64_t> doc(64, 7);
  doc[4] = 500;
  const std::string prefix = WriteDataset(FreshDir("token_ids") + "/one_bad", {doc});
  auto ds = IndexedDataset::Open(prefix);
  ASSERT_TRUE(ds.ok());
  GptIndexConfig config;
  config.sequence_length = 16;
  config.num_samples = 1;
  auto gpt = GptDataset::Create(*std::move(ds), {0}, config, {{64, ""}, "--data-path " + prefix});
  ASSERT_TRUE(gpt.ok());
  bool found = false;
  for (int64_t i = 0; i < (*gpt)->size(); ++i) {
    auto s = (*gpt)->Sample(i);
    if (s.ok()) continue;
    found = true;
    EXPECT_THAT(s.status().message(), HasSubstr("sequence 0 (token 4) holds token id 500"));
  }
  EXPECT_TRUE(found);
}

TEST(TokenIdsTest, NegativeIdsAreRefused) {
  const std::string prefix = WriteDataset(FreshDir("token_ids") + "/negative",
                                          Documents({{5, 1, -3}}), TokenDType::kInt32);
  Config c = FixtureConfig(prefix);
  c.mutable_model()->set_vocab_size(100);
  const absl::Status st = FirstError(BuildTrainingData(c, 200, 0, 0), 200);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(prefix));
  EXPECT_THAT(st.message(), HasSubstr("holds token id -3, which is negative"));
}

TEST(TokenIdsTest, FixtureOverTheVocabularyFailsNamingFileIdAndFix) {
  Config c = FixtureConfig(Fixture());
  c.mutable_model()->set_vocab_size(64);
  auto data = BuildTrainingData(c, 40, 0, 0);
  ASSERT_FALSE(data.ok()) << "ids up to 49966 with --vocab-size 64 built";
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  std::string m(data.status().message());
  EXPECT_THAT(m, HasSubstr("--data-path " + Fixture() + ": "));
  EXPECT_THAT(m, HasSubstr("holds token id "));
  EXPECT_THAT(m, HasSubstr("vocabulary of 64 ids (--vocab-size 64)"));
  EXPECT_THAT(m, HasSubstr("--vocab-size must exceed every token id: the data holds id 49966; "
                           "pass --vocab-size 49967 or the --tokenizer-type the data was made "
                           "with"));

  // NullTokenizer: --vocab-size 1000 gives ids 0..1000 (1000 its eod), 1001
  // in all, which ResolveVocabulary puts in the config.
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  c.mutable_model()->set_vocab_size(1000);
  ASSERT_TRUE(ResolveVocabulary(&c).ok());
  data = BuildTrainingData(c, 40, 0, 0);
  ASSERT_FALSE(data.ok());
  m = std::string(data.status().message());
  EXPECT_THAT(m, HasSubstr(Fixture()));
  EXPECT_THAT(m, HasSubstr("vocabulary of 1001 ids"));
  EXPECT_THAT(m, HasSubstr("NullTokenizer"));
  EXPECT_THAT(m, HasSubstr("the data holds id 49966; pass --vocab-size 49966"));

  // A tokenizer with a fixed vocabulary: --vocab-size cannot help.
  c.mutable_data()->set_tokenizer_type("ByteTokenizer");
  ASSERT_TRUE(ResolveVocabulary(&c).ok());
  data = BuildTrainingData(c, 40, 0, 0);
  ASSERT_FALSE(data.ok());
  m = std::string(data.status().message());
  EXPECT_THAT(m, HasSubstr(Fixture()));
  EXPECT_THAT(m, HasSubstr("vocabulary of --tokenizer-type ByteTokenizer (257 ids)"));
  EXPECT_THAT(m, HasSubstr("the data holds id 49966"));
  EXPECT_THAT(m, HasSubstr("pass the --tokenizer-type"));
}

TEST(TokenIdsTest, NullTokenizerAsTheTrainerResolvesIt) {
  // ResolveVocabulary sets --vocab-size to the tokenizer's vocabulary before
  // the data is built: NullTokenizer --vocab-size 49966 becomes 49967, whose
  // ids 0..49966 hold the fixture; 49965 (-> 49966) does not.
  const Config flags = FixtureConfig(Fixture());
  Config c = flags;
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  c.mutable_model()->set_vocab_size(49966);
  ASSERT_TRUE(ResolveVocabulary(&c).ok());
  auto data = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->token_ids.vocab_size, 49967);
  for (int64_t i = 0; i < 40; ++i) EXPECT_TRUE(data->train->Sample(i).ok()) << i;
  c = flags;
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  c.mutable_model()->set_vocab_size(49965);
  ASSERT_TRUE(ResolveVocabulary(&c).ok());
  const absl::Status st = FirstError(BuildTrainingData(c, 40, 0, 0), 40);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("holds token id 49966, outside the model's vocabulary of "
                                      "49966 ids"));
  EXPECT_THAT(st.message(), HasSubstr("pass --vocab-size 49966"));
}

TEST(TokenIdsTest, InRangeDataIsServedUnchanged) {
  Config c = FixtureConfig(Fixture());
  c.mutable_model()->set_vocab_size(kFixtureLargestId + 1);  // the smallest that holds it
  auto checked = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(checked.ok()) << checked.status();
  TrainingDataOptions off;
  off.check_token_ids = false;
  auto plain = BuildTrainingData(c, 40, 0, 0, off);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (int64_t i = 0; i < 40; ++i) {
    auto a = checked->train->Sample(i);
    auto b = plain->train->Sample(i);
    ASSERT_TRUE(a.ok() && b.ok()) << i;
    EXPECT_EQ(*a, *b) << "sample " << i;
  }
  // The GPT-2 tokenizer the fixture's ids were drawn for.
  c.mutable_data()->set_tokenizer_type("GPT2BPETokenizer");
  c.mutable_data()->set_vocab_file(TestDataDir() + "/gpt2/vocab.json");
  c.mutable_data()->set_merge_file(TestDataDir() + "/gpt2/merges.txt");
  c.mutable_model()->set_vocab_size(50257);
  auto gpt2 = BuildTrainingData(c, 40, 0, 0);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ(gpt2->token_ids.vocab_size, 50257);
}

TEST(TokenIdsTest, EverySplitAndEveryBlendedDatasetIsChecked) {
  // "1,1,0" of 40 documents: train draws on 0..19, validation on 20..39,
  // each of which holds an id over the vocabulary.
  std::vector<Planted> planted;
  for (int d = 20; d < 40; ++d) planted.push_back({d, 0, 300});
  const std::string bad = WriteDataset(FreshDir("token_ids") + "/bad_tail", Documents(planted));
  DatasetBuildConfig split_build;
  split_build.sequence_length = 16;
  split_build.random_seed = 1234;
  split_build.split = "1,1,0";
  split_build.blend = Blend{{bad}, {}};
  split_build.token_ids = {100, ""};
  auto split = BuildSplitDatasets(split_build, {40, 20, 0});
  ASSERT_TRUE(split.ok()) << split.status();
  for (int64_t i = 0; i < 40; ++i) EXPECT_TRUE((*split)[0]->Sample(i).ok()) << "train " << i;
  for (int64_t i = 0; i < 20; ++i) {
    auto s = (*split)[1]->Sample(i);
    ASSERT_FALSE(s.ok()) << "validation sample " << i << " was served";
    EXPECT_THAT(s.status().message(), HasSubstr("--data-path " + bad + ": sequence "));
    EXPECT_THAT(s.status().message(), HasSubstr("holds token id 300"));
  }
  // Through BuildTrainingData, which reads each split's first sample at once.
  Config c = FixtureConfig(bad);
  c.mutable_data()->set_split("1,1,0");
  c.mutable_model()->set_vocab_size(100);
  auto data = BuildTrainingData(c, 40, 20, 0);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr(bad));
  TrainingDataOptions off;
  off.check_token_ids = false;
  ASSERT_TRUE(BuildTrainingData(c, 40, 20, 0, off).ok());

  // A blend of a clean and a bad dataset: the error names the bad one.
  const std::string clean = WriteDataset(FreshDir("token_ids") + "/clean", Documents({}));
  const std::string bad2 =
      WriteDataset(FreshDir("token_ids") + "/bad_head", Documents({{0, 0, 300}}));
  DatasetBuildConfig build;
  build.sequence_length = 16;
  build.random_seed = 1234;
  build.split = "1,0,0";
  build.blend = Blend{{clean, bad2}, {1.0, 1.0}};
  build.token_ids = {100, ""};
  auto splits = BuildSplitDatasets(build, {100, 0, 0});
  ASSERT_TRUE(splits.ok()) << splits.status();
  int refused = 0;
  for (int64_t i = 0; i < (*splits)[0]->size(); ++i) {
    auto s = (*splits)[0]->Sample(i);
    if (s.ok()) continue;
    ++refused;
    EXPECT_THAT(s.status().message(), HasSubstr("--data-path " + bad2 + ": "));
    EXPECT_THAT(s.status().message(), Not(HasSubstr(clean + ":")));
  }
  EXPECT_GT(refused, 0);
}

TEST(TokenIdsTest, MockDataStaysBelowTheModelVocabulary) {
  Config c;
  c.mutable_model()->set_seq_length(32);
  c.mutable_data()->set_mock_data(true);
  // --tokenizer-type NullTokenizer --vocab-size 127 resolves to 128 ids: the
  // model has 128 rows, so mock ids must stay below 128 (and so must they
  // without a tokenizer, --vocab-size 128).
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  c.mutable_model()->set_vocab_size(127);
  ASSERT_TRUE(ResolveVocabulary(&c).ok());
  for (const bool null_tokenizer : {true, false}) {
    if (!null_tokenizer) c.mutable_data()->clear_tokenizer_type();
    auto data = BuildTrainingData(c, 500, 0, 0);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(data->token_ids.vocab_size, 128);
    int64_t largest = 0;
    for (int64_t i = 0; i < 500; ++i) {
      auto s = data->train->Sample(i);
      ASSERT_TRUE(s.ok());
      for (int32_t id : *s) {
        ASSERT_GE(id, 0);
        largest = std::max<int64_t>(largest, id);
      }
    }
    EXPECT_EQ(largest, 127) << "mock ids should use the whole vocabulary, and no more";
  }
}

TEST(DataPathTest, BinOrIdxPathSaysToPassThePrefix) {
  for (const char* suffix : {".bin", ".idx"}) {
    Config c = FixtureConfig(Fixture() + suffix);
    c.mutable_model()->set_vocab_size(50257);
    auto data = BuildTrainingData(c, 40, 0, 0);
    ASSERT_FALSE(data.ok());
    EXPECT_THAT(data.status().message(),
                HasSubstr(absl::StrCat("--data-path ", Fixture(), suffix,
                                       ": --data-path takes a "
                                       "dataset's prefix, without .bin or .idx")));
    EXPECT_THAT(data.status().message(), HasSubstr("pass --data-path " + Fixture()));
    EXPECT_THAT(data.status().message(), Not(HasSubstr("does not exist")));
  }
  // The per-split flags name themselves.
  DatasetBuildConfig build;
  build.sequence_length = 16;
  build.blend_per_split[0] = Blend{{Fixture() + ".bin"}, {}};
  auto splits = BuildSplitDatasets(build, {10, 0, 0});
  ASSERT_FALSE(splits.ok());
  EXPECT_THAT(splits.status().message(), HasSubstr("pass --train-data-path " + Fixture()));
  // A missing dataset named by its .bin says that as well.
  Config c = FixtureConfig("/nonexistent/corpus.bin");
  c.mutable_model()->set_vocab_size(64);
  auto missing = BuildTrainingData(c, 40, 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("pass --data-path /nonexistent/corpus"));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("/nonexistent/corpus.idx does not exist either"));
  // A prefix that itself ends in .bin (its files are x.bin.bin, x.bin.idx) is fine.
  const std::string odd = WriteDataset(FreshDir("token_ids") + "/odd.bin", Documents({}));
  c = FixtureConfig(odd);
  c.mutable_model()->set_vocab_size(100);
  auto data = BuildTrainingData(c, 10, 0, 0);
  EXPECT_TRUE(data.ok()) << data.status();
}

TEST(DataPathTest, EmptyDatasetSaysSoNamingTheFile) {
  const std::string none = WriteDataset(FreshDir("token_ids") + "/no_documents", {});
  const std::string hollow = WriteDataset(FreshDir("token_ids") + "/empty_documents", {{}, {}});
  for (const std::string& prefix : {none, hollow}) {
    Config c = FixtureConfig(prefix);
    c.mutable_model()->set_vocab_size(64);
    auto data = BuildTrainingData(c, 8, 0, 0);
    ASSERT_FALSE(data.ok()) << prefix;
    const std::string m(data.status().message());
    EXPECT_THAT(m, HasSubstr("--data-path " + prefix + ": the dataset is empty"));
    EXPECT_THAT(m, HasSubstr(prefix + ".idx lists "));
    EXPECT_THAT(m, HasSubstr(" 0 tokens"));
    EXPECT_THAT(m, Not(HasSubstr("--split")));
    EXPECT_THAT(m, Not(HasSubstr("larger share")));
  }
  // In a blend too, and through --train-data-path.
  DatasetBuildConfig build;
  build.sequence_length = 16;
  build.blend_per_split[0] = Blend{{Fixture(), none}, {}};
  auto splits = BuildSplitDatasets(build, {10, 0, 0});
  ASSERT_FALSE(splits.ok());
  EXPECT_THAT(splits.status().message(),
              HasSubstr("--train-data-path " + none + ": the dataset is empty"));
}

}  // namespace
}  // namespace conveyor
