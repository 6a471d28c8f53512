#include "trainer/hf/mtp_shared_copies.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/index_runs.h"

namespace conveyor {
namespace {

constexpr int64_t kSlabElements = int64_t{1} << 16;

std::string RefusalFix(const std::string& copy, const std::string& original) {
  return absl::StrCat(
      "; DeepSeek-V3's multi-token prediction depths share the model's embedding and output "
      "layer, as Conveyor's do, so the import reads ",
      original, " and the copy must hold the same values bit for bit: write ", original,
      " into ", copy, " (or load a checkpoint whose copies agree)");
}

// `values` (elements [begin, ...) of `original`) against the same elements of `copy`.
absl::Status CompareRange(MappedHfWeights* weights, const std::string& copy,
                          const std::string& original, int64_t begin, const float* values,
                          int64_t count) {
  const SafetensorsEntry* copy_entry = weights->Find(copy);
  const SafetensorsEntry* original_entry = weights->Find(original);
  if (copy_entry == nullptr) return absl::OkStatus();  // no copy stored: nothing to drop
  if (original_entry != nullptr && copy_entry->shape != original_entry->shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--load-hf: tensor ", copy, " in ", weights->FileOf(copy), " has shape ",
        FormatShape(copy_entry->shape), ", its original ", original, " ",
        FormatShape(original_entry->shape), RefusalFix(copy, original)));
  }
  std::vector<float> copied(count);
  RETURN_IF_ERROR(weights->Read(copy, begin, count, copied.data()));
  for (int64_t i = 0; i < count; ++i) {
    if (std::memcmp(&copied[i], &values[i], sizeof(float)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--load-hf: tensor ", copy, " in ", weights->FileOf(copy), " differs from ", original,
          " at element ", begin + i, " (", copied[i], " against ", values[i], ")",
          RefusalFix(copy, original)));
    }
  }
  return absl::OkStatus();
}

// Each original's copies.
std::multimap<std::string, std::string> CopiesByOriginal(const LlamaDims& dims) {
  std::multimap<std::string, std::string> copies;
  for (const auto& [copy, original] : MtpSharedCopies(dims)) copies.emplace(original, copy);
  return copies;
}

}  // namespace

HfRangeReader ReadComparingSharedCopies(const LlamaDims& dims, MappedHfWeights* weights) {
  return [weights, copies = CopiesByOriginal(dims)](const std::string& name, int64_t begin,
                                                    int64_t count, float* out) -> absl::Status {
    RETURN_IF_ERROR(weights->Read(name, begin, count, out));
    const auto [first, last] = copies.equal_range(name);
    for (auto it = first; it != last; ++it) {
      RETURN_IF_ERROR(CompareRange(weights, it->second, name, begin, out, count));
    }
    return absl::OkStatus();
  };
}

absl::Status CheckSharedCopies(const LlamaDims& dims, MappedHfWeights* weights) {
  std::vector<float> slab;
  for (const auto& [copy, original] : MtpSharedCopies(dims)) {
    const SafetensorsEntry* entry = weights->Find(original);
    if (entry == nullptr || weights->Find(copy) == nullptr) continue;
    const int64_t elements = NumElements(entry->shape);
    for (int64_t begin = 0; begin < elements; begin += kSlabElements) {
      const int64_t count = std::min(kSlabElements, elements - begin);
      slab.resize(count);
      RETURN_IF_ERROR(weights->Read(original, begin, count, slab.data()));
      RETURN_IF_ERROR(CompareRange(weights, copy, original, begin, slab.data(), count));
    }
  }
  return absl::OkStatus();
}

}  // namespace conveyor
