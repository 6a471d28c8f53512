#include "data/gpt_dataset.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<GptDataset>> GptDataset::Create(
    std::shared_ptr<const IndexedDataset> dataset, std::vector<int32_t> documents,
    const GptIndexConfig& config, int32_t pad_token) {
  absl::StatusOr<GptIndices> indices =
      BuildGptIndices(dataset->sequence_lengths(), documents, config);
  if (!indices.ok()) {
    return absl::Status(indices.status().code(),
                        absl::StrCat(dataset->path_prefix(), ": ", indices.status().message()));
  }
  return FromIndices(std::move(dataset), config, *std::move(indices), pad_token);
}

std::unique_ptr<GptDataset> GptDataset::FromIndices(std::shared_ptr<const IndexedDataset> dataset,
                                                    const GptIndexConfig& config,
                                                    GptIndices indices, int32_t pad_token) {
  auto out = std::unique_ptr<GptDataset>(new GptDataset());
  out->dataset_ = std::move(dataset);
  out->config_ = config;
  out->pad_token_ = pad_token;
  out->indices_ = std::move(indices);
  return out;
}

absl::StatusOr<std::vector<int32_t>> GptDataset::Sample(int64_t index) const {
  const int64_t n = size();
  if (n == 0) return absl::FailedPreconditionError("empty GPT dataset");
  const int64_t wrapped = ((index % n) + n) % n;
  return UnshuffledSample(indices_.shuffle_index[wrapped]);
}

absl::StatusOr<std::vector<int32_t>> GptDataset::UnshuffledSample(int64_t row) const {
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const std::vector<int64_t>& s = indices_.sample_index;
  const int64_t begin = s[2 * row], begin_offset = s[2 * row + 1];
  const int64_t end = s[2 * row + 2], end_offset = s[2 * row + 3];
  std::vector<int32_t> tokens;
  tokens.reserve(config_.sequence_length + extra);
  // The sample runs from (begin, begin_offset) up to and including token
  // end_offset of document `end` (the extra label token).
  for (int64_t pos = begin; pos <= end; ++pos) {
    const int64_t doc = indices_.document_index[pos];
    const int64_t offset = pos == begin ? begin_offset : 0;
    const int64_t length = pos == end ? end_offset + extra - offset : -1;
    if (absl::Status st = dataset_->AppendTokens(doc, offset, length, &tokens); !st.ok()) {
      return st;
    }
  }
  if (std::optional<size_t> bad = FirstTokenIdOutside(tokens, limit_)) {
    return TokenIdError(tokens, *bad, row);
  }
  tokens.resize(config_.sequence_length + extra, pad_token_);
  return tokens;
}

absl::Status GptDataset::TokenIdError(const std::vector<int32_t>& tokens, size_t position,
                                      int64_t row) const {
  // Which sequence the token came from: the pieces UnshuffledSample appended.
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const std::vector<int64_t>& s = indices_.sample_index;
  const int64_t begin = s[2 * row], begin_offset = s[2 * row + 1];
  const int64_t end = s[2 * row + 2], end_offset = s[2 * row + 3];
  int64_t sequence = -1, offset_in_sequence = 0, seen = 0;
  for (int64_t pos = begin; pos <= end && sequence < 0; ++pos) {
    const int64_t doc = indices_.document_index[pos];
    const int64_t offset = pos == begin ? begin_offset : 0;
    const int64_t length =
        pos == end ? end_offset + extra - offset : dataset_->sequence_lengths()[doc] - offset;
    if (int64_t(position) < seen + length) {
      sequence = doc;
      offset_in_sequence = offset + int64_t(position) - seen;
    }
    seen += length;
  }
  // The exact largest id needs a pass over the whole file: done when that is
  // cheap (under a second), else the sample's largest is a lower bound.
  constexpr int64_t kExactScanTokens = int64_t{1} << 27;
  std::optional<int64_t> largest = dataset_->LargestTokenId(kExactScanTokens);
  int64_t lower_bound = tokens[position];
  for (int32_t id : tokens) lower_bound = std::max<int64_t>(lower_bound, id);
  return TokenIdOutsideVocabularyError(
      limit_, source_.empty() ? dataset_->path_prefix() : source_,
      absl::StrCat("sequence ", sequence, " (token ", offset_in_sequence, ")"), tokens[position],
      largest.value_or(lower_bound), largest.has_value());
}

}  // namespace conveyor
