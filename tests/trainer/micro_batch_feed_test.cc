// The micro-batch feed over file data checked against the vocabulary: a
// micro-batch with a sample holding an id outside it fails (with the step, the
// sample, the file and the id) instead of reaching the model; every other
// micro-batch carries the samples' tokens and labels unchanged.
#include "trainer/micro_batch_feed.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/indexed_dataset_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const IndexedDataset> WriteAndOpen(const std::string& prefix) {
  auto builder = IndexedDatasetBuilder::Create(prefix + ".bin", TokenDType::kUint16);
  EXPECT_TRUE(builder.ok()) << builder.status();
  for (int d = 0; d < 30; ++d) {
    std::vector<int64_t> doc(5 + (d * 3) % 11);
    for (size_t k = 0; k < doc.size(); ++k) doc[k] = (d * 13 + int64_t(k) * 7) % 50;
    if (d == 11) doc[2] = 50;  // the one id outside a vocabulary of 50
    EXPECT_TRUE((*builder)->AddDocument(doc, {int32_t(doc.size())}).ok());
  }
  EXPECT_TRUE((*builder)->Finalize(prefix + ".idx").ok());
  auto opened = IndexedDataset::Open(prefix);
  EXPECT_TRUE(opened.ok()) << opened.status();
  return *std::move(opened);
}

TEST(MicroBatchFeedTest, RefusesMicroBatchesWithIdsOutsideTheVocabulary) {
  const std::string prefix = testing_util::FreshDir("feed") + "/data";
  std::shared_ptr<const IndexedDataset> ds = WriteAndOpen(prefix);
  std::vector<int32_t> docs(ds->num_sequences());
  for (size_t i = 0; i < docs.size(); ++i) docs[i] = int32_t(i);
  GptIndexConfig config;
  config.sequence_length = 8;
  config.random_seed = 7;
  config.num_samples = 64;
  auto plain = GptDataset::Create(ds, docs, config, /*token_ids=*/{});
  auto checked =
      GptDataset::Create(ds, docs, config, {{/*vocab_size=*/50, ""}, "--data-path " + prefix});
  ASSERT_TRUE(plain.ok() && checked.ok());

  constexpr int64_t kMicro = 2, kSeq = 8, kDp = 2, kMicroBatches = 4;
  int refused = 0, served = 0;
  for (int64_t iteration = 1; iteration <= 4; ++iteration) {
    const int64_t first = (iteration - 1) * kMicro * kDp * kMicroBatches;
    for (int dp_rank = 0; dp_rank < kDp; ++dp_rank) {
      MicroBatchFeed feed = MakeMicroBatchFeed(**checked, iteration, first, /*training=*/true,
                                               kMicro, kSeq, dp_rank, int(kDp));
      for (int m = 0; m < kMicroBatches; ++m) {
        // What the micro-batch holds, read without the check.
        bool has_bad = false;
        std::vector<int32_t> tokens, labels;
        for (int64_t b = 0; b < kMicro; ++b) {
          const int64_t index = first + (m * kDp + dp_rank) * kMicro + b;
          auto s = (*plain)->Sample(index);
          ASSERT_TRUE(s.ok());
          has_bad |= std::count(s->begin(), s->end(), 50) > 0;
          tokens.insert(tokens.end(), s->begin(), s->end() - 1);
          labels.insert(labels.end(), s->begin() + 1, s->end());
        }
        absl::StatusOr<MicroBatchInput> in = feed(m);
        if (has_bad) {
          ++refused;
          ASSERT_FALSE(in.ok()) << "iteration " << iteration << " micro-batch " << m;
          EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
          EXPECT_THAT(in.status().message(),
                      HasSubstr(absl::StrCat("iteration ", iteration, ", training sample ")));
          EXPECT_THAT(in.status().message(), HasSubstr("--data-path " + prefix + ": sequence 11"));
          EXPECT_THAT(in.status().message(), HasSubstr("holds token id 50"));
          EXPECT_THAT(in.status().message(), HasSubstr("pass --vocab-size 51"));
        } else {
          ++served;
          ASSERT_TRUE(in.ok()) << in.status();
          EXPECT_EQ(in->tokens, tokens);
          EXPECT_EQ(in->labels, labels);
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(served, 0);

  // Validation reads go through the same check.
  MicroBatchFeed eval = MakeMicroBatchFeed(**checked, 0, 0, /*training=*/false, 64, kSeq, 0, 1);
  absl::StatusOr<MicroBatchInput> all = eval(0);
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(), HasSubstr("validation sample "));
  EXPECT_THAT(all.status().message(), HasSubstr("holds token id 50"));
}

}  // namespace
}  // namespace conveyor
