// MakeDocumentMasks against a reference written here from Megatron's
// _get_ltor_masks_and_position_ids (megatron/core/datasets/gpt_dataset.py): the loss
// mask zeroes eod inputs; for each eod index i in order, positions after i drop by
// i + 1 - prev (prev: the previous eod's i + 1) and the [seq, seq] causal attention
// mask loses keys <= i for queries > i. The reference builds that matrix and reads
// each query's first allowed key as its document start.
#include "model/document_masks.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

constexpr int32_t kEod = 9;

struct MegatronMasks {
  std::vector<float> loss_mask;
  std::vector<int32_t> position_ids;
  std::vector<int32_t> first_visible_key;  // per query, from the attention matrix
};

// One sample, Megatron's loop transcribed.
MegatronMasks Reference(const std::vector<int32_t>& data) {
  const int64_t seq = static_cast<int64_t>(data.size());
  MegatronMasks m;
  m.loss_mask.assign(seq, 1.0f);
  m.position_ids.resize(seq);
  std::vector<std::vector<int>> attention(seq, std::vector<int>(seq, 0));
  for (int64_t q = 0; q < seq; ++q) {
    m.position_ids[q] = static_cast<int32_t>(q);
    for (int64_t k = 0; k <= q; ++k) attention[q][k] = 1;  // torch.tril
    if (data[q] == kEod) m.loss_mask[q] = 0.0f;
  }
  std::vector<int64_t> eod_index;
  for (int64_t i = 0; i < seq; ++i) {
    if (data[i] == kEod) eod_index.push_back(i);
  }
  int64_t prev_index = 0;
  for (const int64_t i : eod_index) {
    for (int64_t q = i + 1; q < seq; ++q) {
      for (int64_t k = 0; k <= i; ++k) attention[q][k] = 0;
    }
    for (int64_t q = i + 1; q < seq; ++q)
      m.position_ids[q] -= static_cast<int32_t>(i + 1 - prev_index);
    prev_index = i + 1;
  }
  for (int64_t q = 0; q < seq; ++q) {
    int64_t k = 0;
    while (attention[q][k] == 0) ++k;
    m.first_visible_key.push_back(static_cast<int32_t>(k));
  }
  return m;
}

struct Layout {
  std::string name;
  std::vector<std::vector<int32_t>> samples;
};

std::vector<Layout> Layouts() {
  const int32_t e = kEod;
  return {
      {"none", {{1, 2, 3, 4, 5, 6, 7, 8}}},
      {"at_start", {{e, 2, 3, 4, 5, 6, 7, 8}}},
      {"consecutive", {{1, 2, e, e, e, 6, 7, 8}}},
      {"last", {{1, 2, 3, 4, 5, 6, 7, e}}},
      {"all_eod", {{e, e, e, e, e, e, e, e}}},
      {"two_samples", {{1, e, 3, 4, e, 6, 7, 8}, {e, 2, 3, e, 5, 6, 7, e}}},
  };
}

TEST(DocumentMasksTest, MatchesMegatronsMasksForEveryEodLayout) {
  for (const Layout& layout : Layouts()) {
    const int64_t batch = static_cast<int64_t>(layout.samples.size());
    const int64_t seq = static_cast<int64_t>(layout.samples[0].size());
    std::vector<int32_t> tokens;
    for (const auto& s : layout.samples) tokens.insert(tokens.end(), s.begin(), s.end());
    DocumentMasking all;
    all.eod = kEod;
    all.eod_mask_loss = all.reset_position_ids = all.reset_attention_mask = true;
    const DocumentMasks got = MakeDocumentMasks(tokens, batch, seq, all);
    ASSERT_EQ(got.loss_mask.size(), tokens.size()) << layout.name;
    ASSERT_EQ(got.position_ids.size(), tokens.size()) << layout.name;
    ASSERT_EQ(got.document_start.size(), tokens.size()) << layout.name;
    for (int64_t b = 0; b < batch; ++b) {
      const MegatronMasks want = Reference(layout.samples[b]);
      for (int64_t j = 0; j < seq; ++j) {
        const int64_t t = b * seq + j;
        const std::string where =
            layout.name + " sample " + std::to_string(b) + " token " + std::to_string(j);
        EXPECT_EQ(got.loss_mask[t], want.loss_mask[j]) << where;
        EXPECT_EQ(got.position_ids[t], want.position_ids[j]) << where;
        EXPECT_EQ(got.document_start[t], want.first_visible_key[j]) << where;
      }
    }
  }
}

TEST(DocumentMasksTest, FillsOnlyWhatTheFlagsAskFor) {
  const std::vector<int32_t> tokens = {1, kEod, 3, 4};
  DocumentMasking loss_only;
  loss_only.eod = kEod;
  loss_only.eod_mask_loss = true;
  const DocumentMasks masks = MakeDocumentMasks(tokens, 1, 4, loss_only);
  EXPECT_EQ(masks.loss_mask, (std::vector<float>{1, 0, 1, 1}));
  EXPECT_TRUE(masks.position_ids.empty());
  EXPECT_TRUE(masks.document_start.empty());

  DocumentMasking positions_only;
  positions_only.eod = kEod;
  positions_only.reset_position_ids = true;
  const DocumentMasks positions = MakeDocumentMasks(tokens, 1, 4, positions_only);
  EXPECT_TRUE(positions.loss_mask.empty());
  EXPECT_EQ(positions.position_ids, (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(DocumentMasksTest, RowPositionsReadTheResetPositionsOrTheIndexInTheSample) {
  DocumentMasks masks;
  masks.position_ids = {0, 1, 0, 1, 2, 0, 0, 1};
  MicroBatchContext mb{1, 0, /*batch=*/2, /*seq=*/4};
  EXPECT_EQ(RowPositions(mb, 2, 5), (std::vector<int32_t>{2, 3, 0, 1, 2}));
  mb.documents = &masks;
  EXPECT_EQ(RowPositions(mb, 2, 5), (std::vector<int32_t>{0, 1, 2, 0, 0}));
  // Masks without reset positions leave the index in the sample.
  const DocumentMasks loss_only{{1, 1, 1, 1, 1, 1, 1, 1}, {}, {}};
  mb.documents = &loss_only;
  EXPECT_EQ(RowPositions(mb, 0, 8), (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

}  // namespace
}  // namespace conveyor
