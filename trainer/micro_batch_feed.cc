#include "trainer/micro_batch_feed.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace conveyor {

MicroBatchFeed MakeMicroBatchFeed(const SampleSource& source, int64_t iteration,
                                  int64_t step_first_sample, bool training, int64_t micro,
                                  int64_t seq, int dp_rank, int dp_size,
                                  const DocumentMasking& masking) {
  return [=, &source](int m) -> absl::StatusOr<MicroBatchInput> {
    MicroBatchInput in;
    in.context = {iteration, (int64_t{m} * dp_size + dp_rank) * micro, micro, seq, training};
    in.tokens.resize(micro * seq);
    in.labels.resize(micro * seq);
    for (int64_t b = 0; b < micro; ++b) {
      const int64_t index = step_first_sample + in.context.first_sample + b;
      absl::StatusOr<std::vector<int32_t>> sample = source.Sample(index);
      if (!sample.ok()) {
        // Which step met it: the source names the file and what is wrong.
        return absl::Status(sample.status().code(),
                            training ? absl::StrFormat("iteration %d, training sample %d: %s",
                                                       iteration, index, sample.status().message())
                                     : absl::StrFormat("validation sample %d: %s", index,
                                                       sample.status().message()));
      }
      if (static_cast<int64_t>(sample->size()) != seq + 1) {
        return absl::InternalError(
            absl::StrFormat("sample %d has %d tokens, expected --seq-length + 1 = %d", index,
                            sample->size(), seq + 1));
      }
      std::copy(sample->begin(), sample->end() - 1, in.tokens.begin() + b * seq);
      std::copy(sample->begin() + 1, sample->end(), in.labels.begin() + b * seq);
    }
    if (masking.any()) {
      in.documents = std::make_shared<const DocumentMasks>(
          MakeDocumentMasks(in.tokens, micro, seq, masking));
      in.context.documents = in.documents.get();
    }
    return in;
  };
}

absl::StatusOr<int64_t> CountLossTokens(const SampleSource& source, int64_t first_sample,
                                        int64_t samples, int64_t seq,
                                        const DocumentMasking& masking) {
  if (!masking.eod_mask_loss) return samples * seq;
  int64_t count = 0;
  for (int64_t index = first_sample; index < first_sample + samples; ++index) {
    ASSIGN_OR_RETURN(const std::vector<int32_t> sample, source.Sample(index));
    // The inputs are tokens [0, seq) of the sample.
    count += std::count_if(sample.begin(), sample.begin() + std::min<int64_t>(seq, sample.size()),
                           [&](int32_t token) { return token != masking.eod; });
  }
  return count;
}

}  // namespace conveyor
