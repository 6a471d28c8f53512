// Where a step's micro-batches come from: data-parallel rank d takes samples
// [d * micro, (d + 1) * micro) of each group of DP * micro samples after the step's
// first sample, as Megatron's sampler does; inputs are tokens [0, seq) of a sample and
// labels tokens [1, seq]. A sample the source refuses (e.g. one holding a token id
// outside the vocabulary, see data/token_id_limit.h) fails the micro-batch, its
// message prefixed with the iteration and sample, so no such sample reaches the model.
// With document masking, each micro-batch carries its masks (model/document_masks.h).
#ifndef CONVEYOR_TRAINER_MICRO_BATCH_FEED_H_
#define CONVEYOR_TRAINER_MICRO_BATCH_FEED_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/sample_source.h"
#include "model/document_masks.h"
#include "model/gpt_stage.h"

namespace conveyor {

// `source` must outlive the returned feed.
MicroBatchFeed MakeMicroBatchFeed(const SampleSource& source, int64_t iteration,
                                  int64_t step_first_sample, bool training, int64_t micro,
                                  int64_t seq, int dp_rank, int dp_size,
                                  const DocumentMasking& masking = {});

// The input tokens of samples [first_sample, first_sample + samples) that the loss
// mask keeps (all but the eods under --eod-mask-loss): --calculate-per-token-loss
// divides the step's summed loss by this count over the global batch.
absl::StatusOr<int64_t> CountLossTokens(const SampleSource& source, int64_t first_sample,
                                        int64_t samples, int64_t seq,
                                        const DocumentMasking& masking);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_MICRO_BATCH_FEED_H_
