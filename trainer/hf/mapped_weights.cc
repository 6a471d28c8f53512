#include "trainer/hf/mapped_weights.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/hf/hf_folder.h"

namespace conveyor {

absl::StatusOr<MappedHfWeights> MappedHfWeights::Open(const std::string& dir) {
  ASSIGN_OR_RETURN(const HfWeightFileMap files, HfWeightFilesOf(dir));
  MappedHfWeights weights;
  for (const auto& [path, names] : files) {
    // The header through the checked reader; the data through the map.
    ASSIGN_OR_RETURN(const SafetensorsFile header, SafetensorsFile::Open(path));
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(path));
    for (const std::string& name : names) {
      if (header.Find(name) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(JoinPath(dir, kHfIndexFile), " maps ", name,
                                                       " to ", path, ", which has no such tensor"));
      }
    }
    for (const auto& [name, entry] : header.entries()) {
      if (names.empty() || names.count(name) > 0) {
        weights.tensors_[name] = Located{mapped.get(), entry};
      }
    }
    weights.files_.push_back(std::move(mapped));
  }
  return weights;
}

const SafetensorsEntry* MappedHfWeights::Find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second.entry;
}

std::string MappedHfWeights::FileOf(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? "" : it->second.file->path();
}

std::vector<std::string> MappedHfWeights::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, located] : tensors_) names.push_back(name);
  return names;
}

absl::Status MappedHfWeights::Read(const std::string& name, int64_t begin, int64_t count,
                                   float* out) {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat("tensor ", name, " is missing"));
  }
  Located& located = it->second;
  const MappedFile& file = *located.file;
  const SafetensorsEntry& entry = located.entry;
  if (!IsWeightDtype(entry.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors file ", file.path(), ": tensor ", name, " has dtype ",
                     entry.dtype, "; only floating-point weights (F32, F16, BF16) can be loaded"));
  }
  const int64_t element = entry.dtype == "F32" ? 4 : 2;
  if (begin < 0 || count < 0 || begin + count > NumElements(entry.shape)) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors file ", file.path(), ": elements [",
                                                   begin, ", ", begin + count, ") of tensor ", name,
                                                   " run past its ", NumElements(entry.shape)));
  }
  located.non_finite +=
      WidenElements(entry.dtype, file.data() + entry.begin + begin * element, count, out);
  located.elements_read += count;
  bytes_read_ += count * element;
  return absl::OkStatus();
}

absl::Status MappedHfWeights::CheckFinite() const {
  std::vector<std::string> bad;
  for (const auto& [name, located] : tensors_) {
    if (located.non_finite > 0) {
      bad.emplace_back(NonFiniteWeightsError(name, located.file->path(), located.non_finite,
                                             located.elements_read)
                           .message());
    }
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(bad, "\n"));
}

}  // namespace conveyor
