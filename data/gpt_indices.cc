#include "data/gpt_indices.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/numpy_random.h"
#include "runtime/host_memory.h"

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

// Samples of `sequence_length` (+ `extra`) tokens in `tokens` tokens laid end
// to end; the ragged last one counts unless it is dropped.
int64_t SamplesIn(int64_t tokens, int64_t sequence_length, int64_t extra, bool drop_last) {
  const int64_t usable = tokens - extra;
  return usable / sequence_length + (!drop_last && usable % sequence_length != 0 ? 1 : 0);
}

// ResourceExhausted when BuildGptIndices' arrays for `plan` would not fit in
// the memory this process may use.
absl::Status CheckIndexMemory(const GptEpochPlan& plan, int64_t num_documents) {
  const int64_t document_index =
      SaturatingBytes(double(plan.num_epochs) * double(num_documents) * sizeof(int32_t));
  const int64_t sample_index =
      SaturatingBytes((double(plan.num_samples) + 1) * 2 * sizeof(int64_t));
  const int64_t shuffle_index = SaturatingBytes(double(plan.num_samples) * sizeof(int64_t));
  return CheckHostMemory(
      SaturatingBytes(double(document_index) + double(sample_index) + double(shuffle_index)),
      absl::StrCat("the indices of ", plan.num_samples, " samples (", plan.num_epochs,
                   " epochs of ", num_documents, " documents: document index ",
                   FormatMemorySize(document_index), ", sample index ", FormatMemorySize(sample_index),
                   ", shuffle index ", FormatMemorySize(shuffle_index), ")"));
}

}  // namespace

std::vector<int64_t> BuildSampleIndex(absl::Span<const int32_t> sequence_lengths,
                                      absl::Span<const int32_t> document_index,
                                      int64_t sequence_length, int64_t num_epochs,
                                      int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                                      bool add_extra_token_to_sequence) {
  const int64_t extra = add_extra_token_to_sequence ? 1 : 0;
  const int64_t num_samples =
      SamplesIn(num_epochs * tokens_per_epoch, sequence_length, extra, drop_last_partial_sequence);
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
    int64_t needed = 0;
    if (__builtin_mul_overflow(config.num_samples, config.sequence_length, &needed) ||
        __builtin_add_overflow(needed, extra, &needed)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(config.num_samples, " samples of ", config.sequence_length + extra,
                       " tokens are more tokens than a 64-bit count holds"));
    }
    plan.num_epochs = std::max<int64_t>(
        1, needed / plan.tokens_per_epoch + (needed % plan.tokens_per_epoch != 0 ? 1 : 0));
  }
  int64_t total_tokens = 0;
  if (__builtin_mul_overflow(plan.num_epochs, plan.tokens_per_epoch, &total_tokens)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(plan.num_epochs, " epochs of ", plan.tokens_per_epoch,
                     " tokens are more tokens than a 64-bit count holds"));
  }
  plan.num_samples =
      SamplesIn(total_tokens, config.sequence_length, extra, config.drop_last_partial_sequence);

  if (plan.num_epochs > 1) {
    plan.samples_before_final_epoch =
        ((plan.num_epochs - 1) * plan.tokens_per_epoch - extra) / config.sequence_length;
    const int64_t from_final = config.num_samples - plan.samples_before_final_epoch;
    const int64_t per_epoch = (plan.tokens_per_epoch - extra) / config.sequence_length;
    plan.separate_final_epoch =
        from_final < int64_t(kSeparateFinalEpochThreshold * double(per_epoch));
  }
  RETURN_IF_ERROR(CheckIndexMemory(plan, int64_t(documents.size())));
  return plan;
}

absl::StatusOr<GptIndices> BuildGptIndices(absl::Span<const int32_t> sequence_lengths,
                                           absl::Span<const int32_t> documents,
                                           const GptIndexConfig& config) {
  ASSIGN_OR_RETURN(GptEpochPlan plan, PlanGptEpochs(sequence_lengths, documents, config));
  GptIndices out;
  out.tokens_per_epoch = plan.tokens_per_epoch;
  out.num_epochs = plan.num_epochs;
  out.separate_final_epoch = plan.separate_final_epoch;
  const int64_t samples_before_final_epoch = plan.samples_before_final_epoch;

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

absl::Status ValidateDocumentIndex(absl::Span<const int32_t> documents, const GptEpochPlan& plan,
                                   absl::Span<const int64_t> document_index) {
  const int64_t expected = plan.num_epochs * int64_t(documents.size());
  if (int64_t(document_index.size()) != expected) {
    return absl::DataLossError(absl::StrCat("document_index has ", document_index.size(),
                                            " entries, but ", plan.num_epochs, " epochs of ",
                                            documents.size(), " documents need ", expected));
  }
  // How many more times each document of the split may appear.
  const int64_t largest =
      documents.empty() ? -1 : *std::max_element(documents.begin(), documents.end());
  std::vector<int64_t> remaining(largest + 1, 0);
  for (int32_t d : documents) remaining[d] = plan.num_epochs;
  for (size_t i = 0; i < document_index.size(); ++i) {
    const int64_t d = document_index[i];
    if (d < 0 || d > largest || remaining[d] == 0) {
      const bool in_split = std::find(documents.begin(), documents.end(), d) != documents.end();
      return absl::DataLossError(absl::StrCat(
          "document_index entry ", i, " is document ", d, ", which ",
          in_split ? absl::StrCat("appears more often than its ", plan.num_epochs, " epochs")
                   : "is not a document of this split"));
    }
    --remaining[d];
  }
  return absl::OkStatus();
}

absl::Status ValidateSampleIndex(absl::Span<const int32_t> sequence_lengths,
                                 absl::Span<const int32_t> document_index, const GptEpochPlan& plan,
                                 const GptIndexConfig& config,
                                 absl::Span<const int64_t> sample_index) {
  const absl::Span<const int64_t> s = sample_index;  // rows of (position, offset)
  const int64_t rows = plan.num_samples + 1;
  if (int64_t(s.size()) != 2 * rows) {
    return absl::DataLossError(absl::StrCat("sample_index has ", s.size(), " values, but ",
                                            plan.num_samples, " samples need ", rows,
                                            " rows of 2"));
  }
  if (s[0] != 0 || s[1] != 0) {
    return absl::DataLossError(
        absl::StrCat("sample_index row 0 is (", s[0], ", ", s[1], "), not (0, 0)"));
  }
  const int64_t docs = int64_t(document_index.size());
  for (int64_t r = 1; r < rows; ++r) {
    const int64_t pos = s[2 * r], offset = s[2 * r + 1];
    const int64_t previous = s[2 * r - 2];
    if (pos < previous || pos >= docs || offset < 0 ||
        offset > sequence_lengths[document_index[pos]]) {
      return absl::DataLossError(absl::StrCat("sample_index row ", r, " (", pos, ", ", offset,
                                              ") points outside document_index or goes back"));
    }
    // Tokens from the previous row's start to this one's.
    int64_t step = offset - s[2 * r - 1];
    for (int64_t p = previous; p < pos; ++p) step += sequence_lengths[document_index[p]];
    const bool padded_last = !config.drop_last_partial_sequence && r == rows - 1;
    if (padded_last ? step <= 0 || step > config.sequence_length : step != config.sequence_length) {
      return absl::DataLossError(absl::StrCat("sample_index row ", r, " starts ", step,
                                              " tokens after row ", r - 1, ", not --seq-length ",
                                              config.sequence_length));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateShuffleIndex(const GptEpochPlan& plan,
                                  absl::Span<const int64_t> shuffle_index) {
  const int64_t n = plan.num_samples;
  if (int64_t(shuffle_index.size()) != n) {
    return absl::DataLossError(
        absl::StrCat("shuffle_index has ", shuffle_index.size(), " entries for ", n, " samples"));
  }
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = shuffle_index[i];
    if (v < 0 || v >= n) {
      return absl::DataLossError(
          absl::StrCat("shuffle_index holds ", v, " but there are ", n, " samples"));
    }
    if (seen[v]) {
      return absl::DataLossError(
          absl::StrCat("shuffle_index holds sample ", v, " twice (again at entry ", i,
                       "): it must be a permutation of the ", n, " samples"));
    }
    seen[v] = true;
  }
  return absl::OkStatus();
}

}  // namespace conveyor
