// The safetensors file format (Hugging Face's weight files), written and read from its
// published layout rather than through a library, as the system image has none:
//
//   bytes [0, 8)        N, the header's length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)    a JSON object: for each tensor
//                         "name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}
//                       plus an optional "__metadata__": {string: string}
//   bytes [8 + N, end)  the data; a tensor's bytes are [b, e) counted from 8 + N,
//                       row-major, little-endian
//
// Conveyor writes fp32 (its master weights) or, asked to, BF16 or F16 rounded to nearest
// even; reading widens F16 and BF16, the dtypes published checkpoints most often use.
#ifndef CONVEYOR_TRAINER_HF_SAFETENSORS_H_
#define CONVEYOR_TRAINER_HF_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/python_json.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {

// A whole tensor in memory: row-major fp32 values of `shape`.
struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
// Sorted by name, the order the writer lays tensors out in.
using HfTensorMap = std::map<std::string, HfTensor>;

// The element type a file is written in (export --dtype).
enum class HfDtype { kF32, kBF16, kF16 };
// The header's name ("F32", "BF16", "F16"), torch's ("float32", "bfloat16", "float16",
// config.json's torch_dtype), and the bytes per element.
const char* SafetensorsDtypeName(HfDtype dtype);
const char* TorchDtypeName(HfDtype dtype);
int64_t HfDtypeBytes(HfDtype dtype);
// Whether Conveyor reads `dtype` as weights: "F32", "F16" or "BF16".
bool IsWeightDtype(absl::string_view dtype);
// Widens `count` elements stored as `dtype` (IsWeightDtype) at `bytes` into `out`,
// exactly (every half and bfloat16 is a float). Returns how many of them are NaN or
// infinite, counted in the same pass: no weight a model can train from is.
int64_t WidenElements(absl::string_view dtype, const void* bytes, int64_t count, float* out);

// InvalidArgument for weights that hold `bad` NaN or infinite values among the `read`
// elements of `tensor` in `file`: they cannot be trained from (the first step would
// end in NaN and advise a lower learning rate).
absl::Status NonFiniteWeightsError(absl::string_view tensor, absl::string_view file, int64_t bad,
                                   int64_t read);
// IEEE binary16 bits of `value`, rounded to nearest even: values from 65520 up become
// infinity, those below 2^-14 subnormals (or zero), NaN a quiet NaN.
uint16_t FloatToHalfBits(float value);

// The header that WriteSafetensors puts before the data, length prefix included:
// tensors in name order, data contiguous in that order, the JSON padded with spaces
// so that the data starts at a multiple of 8 bytes. InvalidArgument naming the
// tensor when its data does not match its shape.
absl::StatusOr<std::string> EncodeSafetensorsHeader(
    const HfTensorMap& tensors, const std::map<std::string, std::string>& metadata,
    HfDtype dtype = HfDtype::kF32);

// Writes `path` through a temporary file in the same folder, fsynced and renamed, so
// a crash leaves either the old file or the complete new one. The fp32 values are
// stored as `dtype` (BF16 and F16 rounded to nearest even).
absl::Status WriteSafetensors(const std::string& path, const HfTensorMap& tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              HfDtype dtype = HfDtype::kF32);

// One tensor's header entry; `begin`/`end` are absolute byte offsets in the file.
struct SafetensorsEntry {
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};

// An opened file whose header has been checked: every entry has a known dtype and a
// shape whose byte size equals its offsets' span, and the entries' offsets tile the
// data area exactly (from 0 to the end of the file, no gap, no overlap), as the
// format requires. Tensor data is read on demand, so tensors a caller does not need
// (e.g. GPT-2's attention-mask buffers) cost nothing.
class SafetensorsFile {
 public:
  // InvalidArgument naming the file (and the tensor) for any malformed header, a
  // gap, an overlap or trailing bytes; NotFound when the file does not exist.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Null when the file has no such tensor.
  const SafetensorsEntry* Find(absl::string_view name) const;

  // Whether Read refuses a tensor holding NaN or infinite values (NonFiniteWeightsError).
  enum class FiniteCheck { kRefuseNonFinite, kKeepNonFinite };

  // The tensor's values as fp32 (F32 as stored; F16 and BF16 widened exactly).
  // NotFound or InvalidArgument (another dtype; NaN or infinite values unless kept)
  // naming the file and tensor.
  absl::StatusOr<HfTensor> Read(absl::string_view name,
                                FiniteCheck check_finite = FiniteCheck::kRefuseNonFinite) const;

 private:
  explicit SafetensorsFile(ReadableFile file) : file_(std::move(file)) {}
  // Reads the header (entries_ and metadata_), checking what Open promises.
  absl::Status ParseHeader();
  // The header's JSON object, and its length in bytes.
  absl::StatusOr<Json> ReadHeaderJson(int64_t* header_length) const;
  // The tensors tile the data area, from `data_start` to the end of the file, exactly.
  absl::Status CheckDataTiling(int64_t data_start, int64_t header_length) const;

  ReadableFile file_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of the file (all must be F32, F16 or BF16).
absl::StatusOr<HfTensorMap> ReadSafetensors(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_SAFETENSORS_H_
