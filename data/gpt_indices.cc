#include "data/gpt_indices.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/numpy_random.h"

namespace conveyor {
namespace {

// Share of an epoch below which Megatron shuffles the final epoch on its own,
// so that the few samples taken from it are not biased towards documents the
// shuffle happened to put early.
constexpr double kSeparateFinalEpochThreshold = 0.80;

// `epochs` copies of `documents` laid end to end, shuffled in place.
void AppendShuffledEpochs(absl::Span<const int32_t> documents, int64_t epochs,
                          NumpyRandomState* rng, std::vector<int32_t>* out) {
  const size_t begin = out->size();
  for (int64_t e = 0; e < epochs; ++e) out->insert(out->end(), documents.begin(), documents.end());
  rng->Shuffle(absl::MakeSpan(out->data() + begin, out->size() - begin));
}

// arange(begin, end) shuffled, appended to `out`.
void AppendShuffledRange(int64_t begin, int64_t end, NumpyRandomState* rng,
                         std::vector<int64_t>* out) {
  const size_t start = out->size();
  for (int64_t i = begin; i < end; ++i) out->push_back(i);
  rng->Shuffle(absl::MakeSpan(out->data() + start, out->size() - start));
}

}  // namespace

std::vector<int64_t> BuildSampleIndex(absl::Span<const int32_t> sequence_lengths,
                                      absl::Span<const int32_t> document_index,
                                      int64_t sequence_length, int64_t num_epochs,
                                      int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                                      bool add_extra_token_to_sequence) {
  const int64_t extra = add_extra_token_to_sequence ? 1 : 0;
  const int64_t usable = num_epochs * tokens_per_epoch - extra;
  const int64_t num_samples = drop_last_partial_sequence
                                  ? usable / sequence_length
                                  : (usable + sequence_length - 1) / sequence_length;
  std::vector<int64_t> sample_index(2 * (num_samples + 1));
  int64_t doc_position = 0;  // position in document_index
  int64_t doc_offset = 0;    // token offset within that document
  sample_index[0] = 0;
  sample_index[1] = 0;
  for (int64_t k = 1; k <= num_samples; ++k) {
    int64_t remaining = sequence_length + extra;
    while (remaining != 0) {
      const int64_t doc_length = sequence_lengths[document_index[doc_position]] - doc_offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        // The sample ends inside this document. The next one starts on its
        // last token, which is this sample's extra (label-only) token.
        doc_offset += remaining + doc_length - extra;
        remaining = 0;
      } else if (doc_position + 1 == int64_t(document_index.size())) {
        // Out of documents: only the padded last sample gets here.
        doc_offset = sequence_lengths[document_index[doc_position]] - extra;
        break;
      } else {
        ++doc_position;
        doc_offset = 0;
      }
    }
    sample_index[2 * k] = doc_position;
    sample_index[2 * k + 1] = doc_offset;
  }
  return sample_index;
}

absl::StatusOr<GptEpochPlan> PlanGptEpochs(absl::Span<const int32_t> sequence_lengths,
                                           absl::Span<const int32_t> documents,
                                           const GptIndexConfig& config) {
  if (config.sequence_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-length must be positive, got ", config.sequence_length));
  }
  GptEpochPlan plan;
  for (int32_t d : documents) {
    if (d < 0 || d >= int64_t(sequence_lengths.size())) {
      return absl::InvalidArgumentError(absl::StrCat("document id ", d, " is outside the ",
                                                     sequence_lengths.size(), " sequences"));
    }
    plan.tokens_per_epoch += sequence_lengths[d];
  }
  const int64_t extra = config.add_extra_token_to_sequence ? 1 : 0;
  if (plan.tokens_per_epoch <= extra) {
    return absl::InvalidArgumentError(absl::StrCat("the split has ", plan.tokens_per_epoch,
                                                   " tokens: too few to make any sample"));
  }

  // Enough epochs to cover the requested samples.
  plan.num_epochs = 1;
  if (config.num_samples >= 0) {
    const int64_t needed = config.num_samples * config.sequence_length + extra;
    plan.num_epochs =
        std::max<int64_t>(1, (needed + plan.tokens_per_epoch - 1) / plan.tokens_per_epoch);
  }

  if (plan.num_epochs > 1) {
    plan.samples_before_final_epoch =
        ((plan.num_epochs - 1) * plan.tokens_per_epoch - extra) / config.sequence_length;
    const int64_t from_final = config.num_samples - plan.samples_before_final_epoch;
    const int64_t per_epoch = (plan.tokens_per_epoch - extra) / config.sequence_length;
    plan.separate_final_epoch =
        from_final < int64_t(kSeparateFinalEpochThreshold * double(per_epoch));
  }
  return plan;
}

absl::StatusOr<GptIndices> BuildGptIndices(absl::Span<const int32_t> sequence_lengths,
                                           absl::Span<const int32_t> documents,
                                           const GptIndexConfig& config) {
  absl::StatusOr<GptEpochPlan> plan = PlanGptEpochs(sequence_lengths, documents, config);
  if (!plan.ok()) return plan.status();
  GptIndices out;
  out.tokens_per_epoch = plan->tokens_per_epoch;
  out.num_epochs = plan->num_epochs;
  out.separate_final_epoch = plan->separate_final_epoch;
  const int64_t samples_before_final_epoch = plan->samples_before_final_epoch;

  // One generator, used in this order: document index, then shuffle index.
  NumpyRandomState rng(config.random_seed);
  if (out.separate_final_epoch) {
    AppendShuffledEpochs(documents, out.num_epochs - 1, &rng, &out.document_index);
    AppendShuffledEpochs(documents, 1, &rng, &out.document_index);
  } else {
    AppendShuffledEpochs(documents, out.num_epochs, &rng, &out.document_index);
  }

  out.sample_index = BuildSampleIndex(
      sequence_lengths, out.document_index, config.sequence_length, out.num_epochs,
      out.tokens_per_epoch, config.drop_last_partial_sequence, config.add_extra_token_to_sequence);
  const int64_t built = int64_t(out.sample_index.size() / 2) - 1;
  if (out.separate_final_epoch) {
    AppendShuffledRange(0, samples_before_final_epoch, &rng, &out.shuffle_index);
    AppendShuffledRange(samples_before_final_epoch, built, &rng, &out.shuffle_index);
  } else {
    AppendShuffledRange(0, built, &rng, &out.shuffle_index);
  }
  return out;
}

absl::Status ValidateGptIndices(absl::Span<const int32_t> sequence_lengths,
                                const GptIndices& indices) {
  const int64_t docs = int64_t(indices.document_index.size());
  for (int32_t d : indices.document_index) {
    if (d < 0 || d >= int64_t(sequence_lengths.size())) {
      return absl::DataLossError(absl::StrCat("document_index holds ", d, " but the dataset has ",
                                              sequence_lengths.size(), " sequences"));
    }
  }
  const std::vector<int64_t>& s = indices.sample_index;
  if (s.size() < 2 || s.size() % 2 != 0) {
    return absl::DataLossError(
        absl::StrCat("sample_index has ", s.size(), " values, not rows of 2"));
  }
  const int64_t rows = int64_t(s.size() / 2);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = s[2 * r], offset = s[2 * r + 1];
    if (pos < 0 || pos >= docs || offset < 0 ||
        offset > sequence_lengths[indices.document_index[pos]]) {
      return absl::DataLossError(absl::StrCat("sample_index row ", r, " (", pos, ", ", offset,
                                              ") points outside document_index"));
    }
    if (r > 0 && (pos < s[2 * r - 2] || (pos == s[2 * r - 2] && offset < s[2 * r - 1]))) {
      return absl::DataLossError(absl::StrCat("sample_index row ", r, " goes backwards"));
    }
  }
  if (int64_t(indices.shuffle_index.size()) != rows - 1) {
    return absl::DataLossError(absl::StrCat("shuffle_index has ", indices.shuffle_index.size(),
                                            " entries for ", rows - 1, " samples"));
  }
  for (int64_t v : indices.shuffle_index) {
    if (v < 0 || v >= rows - 1) {
      return absl::DataLossError(
          absl::StrCat("shuffle_index holds ", v, " but there are ", rows - 1, " samples"));
    }
  }
  return absl::OkStatus();
}

}  // namespace conveyor
