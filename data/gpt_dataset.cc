#include "data/gpt_dataset.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<GptDataset>> GptDataset::Create(
    std::shared_ptr<const IndexedDataset> dataset, std::vector<int32_t> documents,
    const GptIndexConfig& config, TokenIdCheck token_ids, int32_t pad_token) {
  ASSIGN_OR_RETURN(GptIndices indices,
                   BuildGptIndices(dataset->sequence_lengths(), documents, config),
                   _ << dataset->path_prefix());
  return FromIndices(std::move(dataset), config, std::move(indices), std::move(token_ids),
                     pad_token);
}

std::unique_ptr<GptDataset> GptDataset::FromIndices(std::shared_ptr<const IndexedDataset> dataset,
                                                    const GptIndexConfig& config,
                                                    GptIndices indices, TokenIdCheck token_ids,
                                                    int32_t pad_token) {
  auto out = std::unique_ptr<GptDataset>(new GptDataset());
  out->dataset_ = std::move(dataset);
  out->config_ = config;
  out->pad_token_ = pad_token;
  out->indices_ = std::move(indices);
  out->token_ids_ = std::move(token_ids);
  return out;
}

absl::StatusOr<std::vector<int32_t>> GptDataset::Sample(int64_t index) const {
  const int64_t n = size();
  if (n == 0) return absl::FailedPreconditionError("empty GPT dataset");
  const int64_t wrapped = ((index % n) + n) % n;
  return UnshuffledSample(indices_.shuffle_index[wrapped]);
}

std::vector<GptDataset::Piece> GptDataset::Pieces(int64_t row) const {
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const std::vector<int64_t>& s = indices_.sample_index;
  const int64_t begin = s[2 * row], begin_offset = s[2 * row + 1];
  const int64_t end = s[2 * row + 2], end_offset = s[2 * row + 3];
  std::vector<Piece> pieces;
  pieces.reserve(end - begin + 1);
  for (int64_t pos = begin; pos <= end; ++pos) {
    const int64_t sequence = indices_.document_index[pos];
    const int64_t offset = pos == begin ? begin_offset : 0;
    const int64_t length =
        pos == end ? end_offset + extra - offset : dataset_->sequence_lengths()[sequence] - offset;
    pieces.push_back({sequence, offset, length});
  }
  return pieces;
}

absl::StatusOr<std::vector<int32_t>> GptDataset::UnshuffledSample(int64_t row) const {
  const int64_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const std::vector<Piece> pieces = Pieces(row);
  std::vector<int32_t> tokens;
  tokens.reserve(config_.sequence_length + extra);
  for (const Piece& p : pieces) {
    RETURN_IF_ERROR(dataset_->AppendTokens(p.sequence, p.offset, p.length, &tokens));
  }
  if (std::optional<size_t> bad = FirstTokenIdOutside(tokens, token_ids_.limit)) {
    return TokenIdError(pieces, tokens, *bad);
  }
  tokens.resize(config_.sequence_length + extra, pad_token_);
  return tokens;
}

absl::Status GptDataset::TokenIdError(const std::vector<Piece>& pieces,
                                      const std::vector<int32_t>& tokens, size_t position) const {
  // Which sequence the token came from: the piece that holds `position`.
  int64_t sequence = -1, offset_in_sequence = 0, seen = 0;
  for (const Piece& p : pieces) {
    if (int64_t(position) < seen + p.length) {
      sequence = p.sequence;
      offset_in_sequence = p.offset + int64_t(position) - seen;
      break;
    }
    seen += p.length;
  }
  // The exact largest id needs a pass over the whole file: done when that is
  // cheap (under a second), else the sample's largest is a lower bound.
  constexpr int64_t kExactScanTokens = int64_t{1} << 27;
  std::optional<int64_t> largest = dataset_->LargestTokenId(kExactScanTokens);
  int64_t lower_bound = tokens[position];
  for (int32_t id : tokens) lower_bound = std::max<int64_t>(lower_bound, id);
  return TokenIdOutsideVocabularyError(
      token_ids_.limit, token_ids_.source.empty() ? dataset_->path_prefix() : token_ids_.source,
      absl::StrCat("sequence ", sequence, " (token ", offset_in_sequence, ")"), tokens[position],
      largest.value_or(lower_bound), largest.has_value());
}

}  // namespace conveyor
