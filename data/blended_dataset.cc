#include "data/blended_dataset.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/blend.h"
#include "runtime/host_memory.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<BlendedDataset>> BlendedDataset::Create(
    std::vector<std::unique_ptr<SampleSource>> datasets, const std::vector<double>& weights,
    int64_t size) {
  if (datasets.empty() || datasets.size() != weights.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a blend needs one weight per dataset; got ",
                                                   datasets.size(), " datasets and ",
                                                   weights.size(), " weights"));
  }
  if (datasets.size() >= 32767) {
    return absl::InvalidArgumentError("a blend holds at most 32766 datasets");
  }
  if (size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("a blend needs a positive size, got ", size));
  }
  double sum = 0;
  for (double w : weights) {
    if (!(w >= 0)) return absl::InvalidArgumentError("blend weights must be non-negative");
    sum += w;
  }
  if (!(sum > 0)) return absl::InvalidArgumentError("blend weights sum to 0");

  RETURN_IF_ERROR(
      CheckHostMemory(SaturatingBytes(double(size) * (sizeof(int16_t) + sizeof(int64_t))),
                      absl::StrCat("the blending indices of ", size, " samples")));

  auto out = std::unique_ptr<BlendedDataset>(new BlendedDataset());
  out->weights_ = NormalizeWeights(weights);
  out->indices_ = BuildBlendingIndices(out->weights_, size);
  std::vector<int64_t> needed(datasets.size(), 0);
  for (int64_t i = 0; i < size; ++i) ++needed[out->indices_.dataset_index[i]];
  for (size_t d = 0; d < datasets.size(); ++d) {
    if (needed[d] > datasets[d]->size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "blended dataset ", d, " has ", datasets[d]->size(), " samples but the blend of ", size,
          " samples takes ", needed[d], " from it"));
    }
  }
  out->datasets_ = std::move(datasets);
  return out;
}

absl::StatusOr<std::vector<int32_t>> BlendedDataset::Sample(int64_t index) const {
  const int64_t n = size();
  const int64_t i = ((index % n) + n) % n;
  return datasets_[indices_.dataset_index[i]]->Sample(indices_.dataset_sample_index[i]);
}

}  // namespace conveyor
