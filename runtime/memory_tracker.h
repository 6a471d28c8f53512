// Live and peak bytes by what they hold, the numbers behind the memory report and
// the memory model of docs/design.md §11 (weights, gradients, optimizer state, activations).
#ifndef CONVEYOR_RUNTIME_MEMORY_TRACKER_H_
#define CONVEYOR_RUNTIME_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>
#include <mutex>

#include "absl/strings/string_view.h"

namespace conveyor {

enum class MemoryCategory { kWeights, kGrads, kOptimizer, kActivations, kOther };
inline constexpr int kNumMemoryCategories = 5;

absl::string_view MemoryCategoryName(MemoryCategory category);

// One tracker per process (= per rank). Thread-safe, since async work may free.
class MemoryTracker {
 public:
  static MemoryTracker& Global();

  void Allocated(MemoryCategory category, int64_t bytes);
  void Freed(MemoryCategory category, int64_t bytes);

  int64_t live_bytes(MemoryCategory category) const;
  int64_t peak_bytes(MemoryCategory category) const;
  int64_t live_total() const;
  // Peak of the sum over categories (not the sum of per-category peaks).
  int64_t peak_total() const;

  // Restarts peak tracking from the current live bytes.
  void ResetPeaks();

 private:
  mutable std::mutex mu_;
  std::array<int64_t, kNumMemoryCategories> live_{};
  std::array<int64_t, kNumMemoryCategories> peak_{};
  int64_t live_total_ = 0;
  int64_t peak_total_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_MEMORY_TRACKER_H_
