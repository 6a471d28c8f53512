#include "trainer/hf/export.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "data/json_lite.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config_validation.h"
#include "trainer/hf/gpt2_config_json.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {
namespace {

constexpr char kWordEmbedding[] = "embedding.word_embeddings.weight";

// Every parameter of the checkpoint as a whole global tensor.
absl::StatusOr<GlobalTensorMap> LoadGlobalParameters(const LoadedCheckpoint& checkpoint,
                                                     const Gpt2Dims& dims) {
  GlobalTensorMap tensors;
  std::vector<TensorShardRef> targets;
  for (const auto& [name, shape] : GptParameterShapes(dims)) {
    const TensorRecord* record = checkpoint.FindTensor(name);
    if (record == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint ", checkpoint.directory(), " has no tensor ", name,
                       ", which its config's model has: not a GPT checkpoint of this version?"));
    }
    const std::vector<int64_t> stored(record->global_shape().begin(), record->global_shape().end());
    if (stored != shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", checkpoint.directory(), ": tensor ", name, " has shape ",
          FormatShape(stored), " but the stored config's model has ", FormatShape(shape)));
    }
    std::vector<float>& data = tensors[name];
    data.resize(NumElements(shape));
    // One run over the whole tensor: the reader gathers it from however many shards
    // the saving layout split it into.
    targets.push_back(TensorShardRef{name, shape, ElementRange(0, int64_t(data.size())),
                                     data.data(), int64_t(data.size())});
  }
  RETURN_IF_ERROR(LoadTensors(checkpoint, targets));
  return tensors;
}

}  // namespace

absl::Status ExportHfGpt2(const std::string& load_dir, std::optional<int64_t> iteration,
                          const std::string& out_dir, HfExportSummary* summary) {
  ASSIGN_OR_RETURN(const LoadedCheckpoint checkpoint, OpenCheckpoint(load_dir, iteration));
  const Config config = checkpoint.State(0).config;
  const TensorRecord* embedding = checkpoint.FindTensor(kWordEmbedding);
  if (embedding == nullptr || embedding->global_shape_size() != 2) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", checkpoint.directory(),
                                            " has no 2-D tensor ", kWordEmbedding,
                                            ": not a GPT model checkpoint"));
  }
  ASSIGN_OR_RETURN(const Gpt2Dims dims, Gpt2DimsFromConfig(config, embedding->global_shape(0)),
                   _ << "cannot export checkpoint " << checkpoint.directory() << " as hf-gpt2");
  ASSIGN_OR_RETURN(const GlobalTensorMap parameters, LoadGlobalParameters(checkpoint, dims));
  ASSIGN_OR_RETURN(const HfTensorMap hf, ConveyorToHfGpt2(parameters, dims));

  RETURN_IF_ERROR(MakeDirs(out_dir));
  const std::string weights_path = JoinPath(out_dir, kHfWeightsFile);
  // transformers refuses safetensors files without a "format" entry in the metadata.
  RETURN_IF_ERROR(WriteSafetensors(weights_path, hf, {{"format", "pt"}}));
  const std::string config_path = JoinPath(out_dir, kHfConfigFile);
  RETURN_IF_ERROR(WriteFileAtomically(config_path, Gpt2ConfigJson(config, dims),
                                      config_path + ".tmp", Durability::kDurable));

  if (summary != nullptr) {
    summary->iteration = checkpoint.iteration();
    summary->tensors = int64_t(hf.size());
    summary->parameters = 0;
    for (const auto& [name, tensor] : hf) summary->parameters += int64_t(tensor.data.size());
    ASSIGN_OR_RETURN(const ReadableFile written, ReadableFile::Open(weights_path));
    summary->bytes = written.size();
  }
  return absl::OkStatus();
}

absl::StatusOr<GlobalTensorMap> ReadHfGpt2(const std::string& dir, const Config& config) {
  const std::string config_path = JoinPath(dir, kHfConfigFile);
  ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(config_path));
  const absl::StatusOr<JsonValue> hf_config = ParseJson(text);
  if (!hf_config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, " is not valid JSON: ", hf_config.status().message()));
  }
  ASSIGN_OR_RETURN(const Gpt2Dims dims, Gpt2DimsFromConfig(config, PaddedVocabSize(config)),
                   _ << "cannot load the GPT-2 model in " << dir);
  RETURN_IF_ERROR(CheckGpt2ConfigJson(*hf_config, config_path, config, dims));

  ASSIGN_OR_RETURN(const SafetensorsFile file,
                   SafetensorsFile::Open(JoinPath(dir, kHfWeightsFile)));
  HfTensorMap tensors;
  for (const auto& [name, entry] : file.entries()) {
    if (IsGpt2MaskBuffer(name)) continue;  // may even be stored as BOOL or U8
    ASSIGN_OR_RETURN(tensors[name], file.Read(name));
  }
  ASSIGN_OR_RETURN(GlobalTensorMap converted, HfToConveyorGpt2(tensors, dims), _ << file.path());
  return converted;
}

}  // namespace conveyor
