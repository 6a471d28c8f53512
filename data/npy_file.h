// numpy's .npy format (version 1.0) for the integer arrays of the index
// cache: Megatron caches its indices as .npy, and keeping the format lets a
// user open Conveyor's cache with numpy.load to see what a run will read.
#ifndef CONVEYOR_DATA_NPY_FILE_H_
#define CONVEYOR_DATA_NPY_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace conveyor {

// Little-endian integer element types: "<i2", "<i4", "<i8", "<u4".
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<int64_t> values;  // C order, widened to int64
};

// The bytes numpy.save writes for this array (header padded to 64 bytes).
// Fails on an unknown descr or a value that does not fit it.
absl::StatusOr<std::string> EncodeNpy(absl::string_view descr, absl::Span<const int64_t> shape,
                                      absl::Span<const int64_t> values);

// Parses .npy bytes (versions 1 and 2, C order, the descrs above). `name`
// (usually the path) prefixes every error.
absl::StatusOr<NpyArray> DecodeNpy(absl::string_view bytes, absl::string_view name);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_NPY_FILE_H_
