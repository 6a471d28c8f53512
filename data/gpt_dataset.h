// Megatron's GPTDataset over one indexed dataset: samples of
// sequence_length + 1 tokens in Megatron's order (see gpt_indices.h).
#ifndef CONVEYOR_DATA_GPT_DATASET_H_
#define CONVEYOR_DATA_GPT_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/gpt_indices.h"
#include "data/indexed_dataset.h"
#include "data/sample_source.h"
#include "data/token_id_limit.h"

namespace conveyor {

// How a GptDataset checks each sample's token ids as it is read: a sample
// holding an id outside `limit` is an InvalidArgument naming `source` (e.g.
// "--data-path /data/web"; the dataset's prefix when empty), the id and the
// fix, instead of tokens. The default ({}) checks nothing.
struct TokenIdCheck {
  TokenIdLimit limit;
  std::string source;
};

class GptDataset : public SampleSource {
 public:
  // `documents`: the sequence ids of this split (e.g. 0..n-1 for split
  // "1,0,0"). `token_ids` is given here, not set later, so that no dataset
  // serves samples before its check is in place. `pad_token` fills the last
  // sample when partial sequences are kept; Megatron uses the tokenizer's pad
  // id, or -1 without one.
  static absl::StatusOr<std::unique_ptr<GptDataset>> Create(
      std::shared_ptr<const IndexedDataset> dataset, std::vector<int32_t> documents,
      const GptIndexConfig& config, TokenIdCheck token_ids, int32_t pad_token = -1);
  // Over indices built elsewhere (e.g. loaded from the cache) for `dataset`.
  static std::unique_ptr<GptDataset> FromIndices(std::shared_ptr<const IndexedDataset> dataset,
                                                 const GptIndexConfig& config, GptIndices indices,
                                                 TokenIdCheck token_ids, int32_t pad_token = -1);

  int64_t size() const override { return indices_.num_samples(); }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override;

  // The sample in sample-index row order, before shuffling.
  absl::StatusOr<std::vector<int32_t>> UnshuffledSample(int64_t row) const;
  const GptIndices& indices() const { return indices_; }
  const IndexedDataset& dataset() const { return *dataset_; }

 private:
  // `length` tokens of sequence `sequence` from `offset`: one stretch of a sample.
  struct Piece {
    int64_t sequence = 0;
    int64_t offset = 0;
    int64_t length = 0;
  };

  GptDataset() = default;
  // The pieces sample-index row `row` is made of, in order: from (begin,
  // begin_offset) up to and including token end_offset of the end document
  // (the extra label token).
  std::vector<Piece> Pieces(int64_t row) const;
  absl::Status TokenIdError(const std::vector<Piece>& pieces, const std::vector<int32_t>& tokens,
                            size_t position) const;

  std::shared_ptr<const IndexedDataset> dataset_;
  GptIndexConfig config_;
  int32_t pad_token_ = -1;
  GptIndices indices_;
  TokenIdCheck token_ids_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_GPT_DATASET_H_
