// The bytes each rank puts into its tensor-, context-, expert-, data- and pipeline-parallel
// groups per iteration (Communicator::message_bytes), the max across ranks over a log
// interval:
//   messages per iteration, max across ranks (MB): tp 1.05 | cp 0.00 | ep 0.00 | dp 3.20 | pp 0.52
// bf16 messages count 2 bytes an element, so the line shows what travelling in bf16
// saves. Every message of the interval counts, evaluation's included.
#ifndef CONVEYOR_TRAINER_REPORTING_MESSAGE_BYTES_H_
#define CONVEYOR_TRAINER_REPORTING_MESSAGE_BYTES_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/rank_context.h"

namespace conveyor {

class MessageBytes {
 public:
  // Counts from now on; `context` must outlive this object.
  explicit MessageBytes(const RankContext& context) : context_(context), last_(Totals()) {}

  // The line for the `iterations` since the last report; a collective over the world
  // group (every rank calls).
  absl::StatusOr<std::string> Report(int64_t iterations);

 private:
  static constexpr int kGroups = 5;  // tp, cp, ep, dp, pp
  std::array<int64_t, kGroups> Totals() const;

  const RankContext& context_;
  std::array<int64_t, kGroups> last_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_MESSAGE_BYTES_H_
