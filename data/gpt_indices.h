// The three index arrays behind Megatron's GPTDataset, built as Megatron
// builds them so that the same files, seed and sequence length give the same
// samples in the same order:
//   document_index: the dataset's documents repeated once per epoch and
//                   shuffled (the final epoch shuffled on its own when it is
//                   used only in small part);
//   sample_index:   where each sample of seq_length + 1 tokens starts, as
//                   (position in document_index, token offset); samples run
//                   across document boundaries;
//   shuffle_index:  the order in which samples are served.
#ifndef CONVEYOR_DATA_GPT_INDICES_H_
#define CONVEYOR_DATA_GPT_INDICES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace conveyor {

struct GptIndexConfig {
  int64_t sequence_length = 0;
  uint32_t random_seed = 0;
  // Samples requested; negative means "one epoch" (Megatron's None).
  int64_t num_samples = -1;
  // Each sample carries one token more than sequence_length (the last label).
  bool add_extra_token_to_sequence = true;
  // Megatron drops the ragged last sample on train splits (and, by default,
  // on validation); otherwise it is padded.
  bool drop_last_partial_sequence = true;
};

struct GptIndices {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  std::vector<int32_t> document_index;
  // Row-major [num_samples + 1, 2]: sample k spans row k to row k + 1.
  std::vector<int64_t> sample_index;
  std::vector<int64_t> shuffle_index;

  int64_t num_samples() const { return int64_t(shuffle_index.size()); }
};

// The sizes that decide the arrays: tokens per epoch, how many epochs cover
// the requested samples, and whether the last epoch is shuffled on its own.
struct GptEpochPlan {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  int64_t samples_before_final_epoch = 0;  // meaningful with separate_final_epoch
  int64_t num_samples = 0;                 // samples the epochs hold: the index's length
};

// `sequence_lengths` are the lengths of every sequence in the indexed dataset;
// `documents` the ids of the sequences in this split (Megatron's
// indexed_indices). Errors: bad sequence length, a document id out of range,
// too few tokens for one sample; ResourceExhausted, naming the sizes, when the
// arrays would not fit in the memory this process may use (see
// runtime/host_memory.h) or the token count overflows 64 bits.
absl::StatusOr<GptEpochPlan> PlanGptEpochs(absl::Span<const int32_t> sequence_lengths,
                                           absl::Span<const int32_t> documents,
                                           const GptIndexConfig& config);

absl::StatusOr<GptIndices> BuildGptIndices(absl::Span<const int32_t> sequence_lengths,
                                           absl::Span<const int32_t> documents,
                                           const GptIndexConfig& config);

// Checks of arrays read from elsewhere (a cache file) against the plan and the
// dataset, so that a stale or damaged file is an error, not a wild read or a
// silently different sample order. Each is a DataLoss error whose message
// starts with the array's name.
//
// document_index: each of `documents` exactly plan.num_epochs times (every
// epoch shuffles all of them), and nothing else.
absl::Status ValidateDocumentIndex(absl::Span<const int32_t> documents, const GptEpochPlan& plan,
                                   absl::Span<const int64_t> document_index);
// sample_index: plan.num_samples + 1 rows from (0, 0), each inside
// document_index and --seq-length tokens after the previous one (the padded
// last sample may be shorter when partial sequences are kept).
absl::Status ValidateSampleIndex(absl::Span<const int32_t> sequence_lengths,
                                 absl::Span<const int32_t> document_index, const GptEpochPlan& plan,
                                 const GptIndexConfig& config,
                                 absl::Span<const int64_t> sample_index);
// shuffle_index: a permutation of 0 .. plan.num_samples - 1.
absl::Status ValidateShuffleIndex(const GptEpochPlan& plan,
                                  absl::Span<const int64_t> shuffle_index);

// Megatron's helpers.build_sample_idx on its own (exposed for tests).
std::vector<int64_t> BuildSampleIndex(absl::Span<const int32_t> sequence_lengths,
                                      absl::Span<const int32_t> document_index,
                                      int64_t sequence_length, int64_t num_epochs,
                                      int64_t tokens_per_epoch, bool drop_last_partial_sequence,
                                      bool add_extra_token_to_sequence);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_GPT_INDICES_H_
