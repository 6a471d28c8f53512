#include "runtime/memory_tracker.h"

#include <algorithm>

namespace conveyor {

absl::string_view MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kWeights:
      return "weights";
    case MemoryCategory::kGrads:
      return "grads";
    case MemoryCategory::kOptimizer:
      return "optimizer";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kOther:
      return "other";
  }
  return "unknown";
}

MemoryTracker& MemoryTracker::Global() {
  static MemoryTracker* tracker = new MemoryTracker();
  return *tracker;
}

void MemoryTracker::Allocated(MemoryCategory category, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const int c = static_cast<int>(category);
  live_[c] += bytes;
  peak_[c] = std::max(peak_[c], live_[c]);
  live_total_ += bytes;
  peak_total_ = std::max(peak_total_, live_total_);
}

void MemoryTracker::Freed(MemoryCategory category, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[static_cast<int>(category)] -= bytes;
  live_total_ -= bytes;
}

int64_t MemoryTracker::live_bytes(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_[static_cast<int>(category)];
}

int64_t MemoryTracker::peak_bytes(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_[static_cast<int>(category)];
}

int64_t MemoryTracker::live_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_total_;
}

int64_t MemoryTracker::peak_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_total_;
}

void MemoryTracker::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = live_;
  peak_total_ = live_total_;
}

}  // namespace conveyor
