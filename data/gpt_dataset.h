// Megatron's GPTDataset over one indexed dataset: samples of
// sequence_length + 1 tokens in Megatron's order (see gpt_indices.h).
#ifndef CONVEYOR_DATA_GPT_DATASET_H_
#define CONVEYOR_DATA_GPT_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "data/gpt_indices.h"
#include "data/indexed_dataset.h"
#include "data/sample_source.h"
#include "data/token_id_limit.h"

namespace conveyor {

class GptDataset : public SampleSource {
 public:
  // `documents`: the sequence ids of this split (e.g. 0..n-1 for split
  // "1,0,0"). `pad_token` fills the last sample when partial sequences are
  // kept; Megatron uses the tokenizer's pad id, or -1 without one.
  static absl::StatusOr<std::unique_ptr<GptDataset>> Create(
      std::shared_ptr<const IndexedDataset> dataset, std::vector<int32_t> documents,
      const GptIndexConfig& config, int32_t pad_token = -1);
  // Over indices built elsewhere (e.g. loaded from the cache) for `dataset`.
  static std::unique_ptr<GptDataset> FromIndices(std::shared_ptr<const IndexedDataset> dataset,
                                                 const GptIndexConfig& config, GptIndices indices,
                                                 int32_t pad_token = -1);

  // From now on every sample's token ids are checked against `limit`: a
  // sample holding an id outside it is an InvalidArgument naming `source`
  // (e.g. "--data-path /data/web"), the id and the fix, instead of tokens.
  void CheckTokenIds(const TokenIdLimit& limit, std::string source) {
    limit_ = limit;
    source_ = std::move(source);
  }

  int64_t size() const override { return indices_.num_samples(); }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override;

  // The sample in sample-index row order, before shuffling.
  absl::StatusOr<std::vector<int32_t>> UnshuffledSample(int64_t row) const;
  const GptIndices& indices() const { return indices_; }
  const IndexedDataset& dataset() const { return *dataset_; }

 private:
  GptDataset() = default;
  absl::Status TokenIdError(const std::vector<int32_t>& tokens, size_t position, int64_t row) const;

  std::shared_ptr<const IndexedDataset> dataset_;
  GptIndexConfig config_;
  int32_t pad_token_ = -1;
  GptIndices indices_;
  TokenIdLimit limit_;
  std::string source_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_GPT_DATASET_H_
