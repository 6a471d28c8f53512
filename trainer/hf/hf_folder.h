// The files of a Hugging Face model folder that Conveyor reads and writes: the
// weights (one model.safetensors, or shards listed by model.safetensors.index.json),
// config.json and generation_config.json, and the tokenizer files copied along.
#ifndef CONVEYOR_TRAINER_HF_HF_FOLDER_H_
#define CONVEYOR_TRAINER_HF_HF_FOLDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/python_json.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {

inline constexpr char kHfWeightsFile[] = "model.safetensors";
inline constexpr char kHfIndexFile[] = "model.safetensors.index.json";
inline constexpr char kHfConfigFile[] = "config.json";
inline constexpr char kHfGenerationConfigFile[] = "generation_config.json";

// config.json of `dir`, parsed; NotFound or InvalidArgument naming the file.
absl::StatusOr<Json> ReadHfConfigJson(const std::string& dir);

// Every tensor of the folder's weights as fp32 (F16 and BF16 widened exactly): from
// model.safetensors, or from the shards model.safetensors.index.json maps them to
// (each shard opened once). Tensors for which `skip` says true are not read.
// Errors name the file and tensor (InvalidArgument for NaN or infinite values, with
// their count); NotFound when neither file exists.
absl::StatusOr<HfTensorMap> ReadHfWeights(const std::string& dir,
                                          const std::function<bool(const std::string&)>& skip);

// The folder's weight files (paths) and the tensors each holds: model.safetensors with
// an empty set (every tensor it has), or the shards model.safetensors.index.json maps
// tensors to. NotFound when neither file exists; InvalidArgument for a bad index.
using HfWeightFileMap = std::map<std::string, std::set<std::string>>;
absl::StatusOr<HfWeightFileMap> HfWeightFilesOf(const std::string& dir);

// What WriteHfWeights wrote.
struct HfWeightFiles {
  std::vector<std::string> files;  // names in the folder, the index last when sharded
  int64_t bytes = 0;               // of the safetensors files
};

// Writes `tensors` (fp32, stored as `dtype`) into `dir` as transformers' save_pretrained
// does: one
// model.safetensors when the data fits in `max_shard_bytes`, otherwise shards
// model-0000i-of-0000n.safetensors of at most that much data each (a tensor larger
// than the limit gets a shard of its own) and model.safetensors.index.json. The form
// not written is removed, so that transformers cannot load a stale one. Each file is
// written under a temporary name and renamed.
absl::StatusOr<HfWeightFiles> WriteHfWeights(const std::string& dir, const HfTensorMap& tensors,
                                             int64_t max_shard_bytes,
                                             HfDtype dtype = HfDtype::kF32);

// Copies the tokenizer files `from` holds (tokenizer.json, tokenizer_config.json,
// tokenizer.model, special_tokens_map.json, vocab.json, merges.txt) into `to`;
// returns their names. NotFound when `from` holds none of them.
absl::StatusOr<std::vector<std::string>> CopyTokenizerFiles(const std::string& from,
                                                            const std::string& to);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_HF_FOLDER_H_
