#include "model/context_rows.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor {

absl::StatusOr<std::vector<float>> GatherMicroBatchRows(const MicroBatchContext& mb,
                                                        Communicator& cp,
                                                        absl::Span<const float> local,
                                                        int64_t width) {
  const int64_t tokens = mb.tokens();
  if (static_cast<int64_t>(local.size()) != tokens * width) {
    return absl::InvalidArgumentError(
        absl::StrCat("a rank's rows of the micro-batch: ", local.size(), " values, not ", tokens,
                     " tokens (", mb.batch, " samples of ", mb.local_seq(), ") x ", width));
  }
  if (mb.cp_size == 1) return std::vector<float>(local.begin(), local.end());
  // Rank-major: rank c's rows at [c * tokens, (c + 1) * tokens).
  std::vector<float> ranks(mb.cp_size * tokens * width);
  RETURN_IF_ERROR(cp.AllGather(local.data(), tokens * width, ranks.data()));
  std::vector<float> full(ranks.size());
  for (int c = 0; c < mb.cp_size; ++c) {
    for (int64_t r = 0; r < tokens; ++r) {
      const int64_t sample = r / mb.local_seq();
      const int64_t row = sample * mb.seq + SamplePosition(mb, c, r % mb.local_seq());
      const float* from = ranks.data() + (c * tokens + r) * width;
      std::copy(from, from + width, full.begin() + row * width);
    }
  }
  return full;
}

}  // namespace conveyor
