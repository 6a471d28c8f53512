// Hugging Face GPT-2 directories (model.safetensors + config.json): exporting a
// Conveyor checkpoint to one, and reading one back as Conveyor's global tensors
// (for --load-hf).
#ifndef CONVEYOR_TRAINER_HF_EXPORT_H_
#define CONVEYOR_TRAINER_HF_EXPORT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor {

inline constexpr char kHfWeightsFile[] = "model.safetensors";
inline constexpr char kHfConfigFile[] = "config.json";

// What an export wrote, for the command's summary.
struct HfExportSummary {
  int64_t iteration = 0;   // of the checkpoint exported
  int64_t tensors = 0;     // in model.safetensors
  int64_t parameters = 0;  // elements in model.safetensors (padding rows excluded)
  int64_t bytes = 0;       // size of model.safetensors
};

// Exports the checkpoint of `iteration` (latest when none) under `load_dir` into
// `out_dir` (created if needed): the weights of the model whose config the checkpoint
// stores, whatever layout saved it. Each file is written under a temporary name and
// renamed, so an interrupted export never leaves a half-written file; config.json is
// written last. Errors name the checkpoint, tensor or file: FailedPrecondition listing
// every architecture mismatch when the model is not GPT-2's; the checkpoint
// library's errors otherwise.
absl::Status ExportHfGpt2(const std::string& load_dir, std::optional<int64_t> iteration,
                          const std::string& out_dir, HfExportSummary* summary = nullptr);

// Reads the GPT-2 directory `dir` as the model `config` describes: config.json must
// agree with it (InvalidArgument listing the differences), and the weights come back
// under Conveyor's names with Conveyor's shapes, the word embedding padded with zero
// rows up to PaddedVocabSize(config).
absl::StatusOr<GlobalTensorMap> ReadHfGpt2(const std::string& dir, const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_EXPORT_H_
