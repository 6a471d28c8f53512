// Hugging Face model folders: exporting a Conveyor checkpoint to one, configuring a
// run from one's config.json, and reading one's weights as Conveyor's global tensors
// (for --load-hf). The architecture comes from hf_architecture.h's table: GPT-2
// (gpt2_mapping.h) or the Llama family (llama_mapping.h).
#ifndef CONVEYOR_TRAINER_HF_EXPORT_H_
#define CONVEYOR_TRAINER_HF_EXPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "trainer/hf/gpt2_mapping.h"
#include "trainer/hf/hf_folder.h"
#include "trainer/hf/llama_config_json.h"

namespace conveyor {

struct HfExportOptions {
  bool gpt2_only = false;     // --format hf-gpt2: refuse other architectures
  std::string architecture;   // class name to write; empty: from the model
  std::string tokenizer_dir;  // tokenizer files to copy; empty: none
  int64_t max_shard_bytes = 5000000000;
  HfTokenIds ids;                 // Llama family; GPT-2 uses its last token
  HfDtype dtype = HfDtype::kF32;  // the safetensors' element type (--dtype)
};

// What an export wrote, for the command's summary.
struct HfExportSummary {
  std::string architecture;  // "LlamaForCausalLM", ...
  int64_t iteration = 0;     // of the checkpoint exported
  int64_t tensors = 0;       // in the safetensors files
  int64_t parameters = 0;    // elements in them (padding rows excluded)
  int64_t bytes = 0;         // size of the safetensors files
  int64_t files = 0;         // safetensors files (1, or the shards)
};

// Exports the checkpoint of `iteration` (latest when none) under `load_dir` into
// `out_dir` (created if needed): the weights of the model whose config the checkpoint
// stores, whatever layout saved it, config.json and (Llama family)
// generation_config.json. Each file is written under a temporary name and renamed;
// config.json last. Errors name the checkpoint, tensor or file: FailedPrecondition
// listing every architecture mismatch when the model fits no supported architecture
// (or not GPT-2's with gpt2_only); the checkpoint library's errors otherwise.
absl::Status ExportHf(const std::string& load_dir, std::optional<int64_t> iteration,
                      const std::string& out_dir, const HfExportOptions& options,
                      HfExportSummary* summary = nullptr);

// --load-hf DIR: checks every field of DIR/config.json against its architecture's
// table (hf_config_fields.h: types, size bounds, fields that change the model in ways
// Conveyor does not compute) and sets the model flags the file fixes (Llama family); a
// GPT-2 config.json sets the size flags not given (those given are compared with it
// when the weights are read). Both leave the vocabulary unpadded unless
// --make-vocab-size-divisible-by is given, so that the loss is transformers'.
// InvalidArgument listing every flag that contradicts the file and every feature the
// file asks for that Conveyor lacks; the file's errors otherwise. Fields the tables do
// not know are named in one line added to `warnings` (when not null).
absl::Status ApplyHfConfig(const std::string& dir, Config* config,
                           std::vector<std::string>* warnings = nullptr);

// Reads the model folder `dir` as the resolved `config` describes it: config.json
// must agree (InvalidArgument listing the differences), and the weights come back
// under Conveyor's names with Conveyor's shapes, the vocabulary padded with zero rows
// up to PaddedVocabSize(config). `wanted` (Llama family): only those Conveyor tensors,
// reading only the HF tensors that hold them, so a pipeline stage reads its own
// layers; null: all. Every tensor read is read whole: ReadHfSlices reads a
// tensor-parallel rank's slices only.
// What ReadHfSlices reads: for each Conveyor tensor, the global flat indices of the
// elements a rank keeps (GlobalIndices, in local order); the values come back in that
// order.
using HfElementRequest = std::map<std::string, std::vector<int64_t>>;
using HfElementValues = std::map<std::string, std::vector<float>>;

// ReadHf for a rank that keeps slices: the folder is memory-mapped and only the
// requested elements' bytes are read (their count goes to `bytes_read` when not null),
// so a tensor-parallel rank reads its rows or columns of each tensor (GPT-2's transposed
// Conv1D weights element by element). Unexpected HF tensors are refused as ReadHf
// refuses them; a tied model's lm_head.weight is never read, so not compared either.
absl::StatusOr<HfElementValues> ReadHfSlices(const std::string& dir, const Config& config,
                                             const HfElementRequest& request,
                                             int64_t* bytes_read = nullptr);

absl::StatusOr<GlobalTensorMap> ReadHf(const std::string& dir, const Config& config,
                                       const std::set<std::string>* wanted = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_EXPORT_H_
