#include "trainer/hf/export.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/config_validation.h"
#include "trainer/hf/gpt2_config_json.h"
#include "trainer/hf/hf_architecture.h"
#include "trainer/hf/hf_config_fields.h"
#include "trainer/hf/llama_mapping.h"
#include "trainer/hf/mapped_weights.h"
#include "trainer/hf/mla_config_json.h"
#include "trainer/hf/mtp_shared_copies.h"
#include "trainer/hf/positions_config_json.h"

namespace conveyor {
namespace {

constexpr char kWordEmbedding[] = "embedding.word_embeddings.weight";

// Every parameter of the checkpoint in `shapes` as a whole global tensor.
absl::StatusOr<GlobalTensorMap> LoadGlobalParameters(
    const LoadedCheckpoint& checkpoint, const std::map<std::string, std::vector<int64_t>>& shapes) {
  GlobalTensorMap tensors;
  std::vector<TensorShardRef> targets;
  for (const auto& [name, shape] : shapes) {
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

absl::Status WriteJson(const std::string& dir, const char* name, const std::string& text) {
  const std::string path = JoinPath(dir, name);
  return WriteFileAtomically(path, text, path + ".tmp", Durability::kDurable);
}

// The HF tensors and config.json of the checkpoint's model.
struct Converted {
  HfTensorMap tensors;
  std::string config_json;
  bool generation_config = false;
};

absl::StatusOr<Converted> Convert(const LoadedCheckpoint& checkpoint, const Config& config,
                                  const HfArchitecture& arch, const HfExportOptions& options,
                                  int64_t padded_vocab) {
  Converted out;
  if (arch.family == HfFamily::kGpt2) {
    ASSIGN_OR_RETURN(const Gpt2Dims dims, Gpt2DimsFromConfig(config, padded_vocab));
    ASSIGN_OR_RETURN(const GlobalTensorMap parameters,
                     LoadGlobalParameters(checkpoint, GptParameterShapes(dims)));
    ASSIGN_OR_RETURN(out.tensors, ConveyorToHfGpt2(parameters, dims));
    out.config_json = Gpt2ConfigJson(config, dims, TorchDtypeName(options.dtype));
    return out;
  }
  ASSIGN_OR_RETURN(const LlamaDims dims, LlamaDimsFromConfig(config, padded_vocab));
  ASSIGN_OR_RETURN(const GlobalTensorMap parameters,
                   LoadGlobalParameters(checkpoint, LlamaParameterShapes(dims)));
  ASSIGN_OR_RETURN(out.tensors, ConveyorToHfLlama(parameters, dims));
  RETURN_IF_ERROR(CheckPositionsExportable(config, arch));
  out.config_json = LlamaConfigJson(config, arch, options.ids, TorchDtypeName(options.dtype));
  out.generation_config = true;
  return out;
}

// config.json of `dir`, its architecture, and its fields checked against that
// architecture's table (hf_config_fields.h): what every reader of a folder starts from.
struct CheckedHfConfig {
  Json hf;
  std::string path;
  const HfArchitecture* arch = nullptr;
};

// transformers 5 writes DeepseekV3Config's num_nextn_predict_layers (1 by default) but
// neither loads nor saves the depths: a folder whose weights hold none of the depths'
// tensors (model.layers.{num_hidden_layers + k}.eh_proj) is imported without them, as
// transformers loads it, and says so; one holding only some is refused. A folder without
// weights (a plan from config.json alone) keeps the count.
absl::Status DropAbsentMtpDepths(const std::string& dir, CheckedHfConfig* checked,
                                 std::vector<std::string>* warnings) {
  const int64_t depths =
      AsInt64(HfFieldOrDefault(checked->hf, *checked->arch, "num_nextn_predict_layers"));
  if (depths <= 0) return absl::OkStatus();
  absl::StatusOr<MappedHfWeights> weights = MappedHfWeights::Open(dir);
  if (absl::IsNotFound(weights.status())) return absl::OkStatus();
  RETURN_IF_ERROR(weights.status());
  const std::vector<std::string> names = weights->Names();
  const std::set<std::string> held(names.begin(), names.end());
  const int64_t layers = AsInt64(MemberOrNull(checked->hf, "num_hidden_layers"));
  int64_t present = 0;
  for (int64_t k = 0; k < depths; ++k) {
    present += held.count(absl::StrCat("model.layers.", layers + k, ".eh_proj.weight"));
  }
  if (present == depths) return absl::OkStatus();
  if (present > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        checked->path, ": num_nextn_predict_layers = ", depths, " but the weights hold ", present,
        " of the multi-token prediction depths (model.layers.", layers, ".eh_proj.weight, ...)"));
  }
  checked->hf["num_nextn_predict_layers"] = 0;
  if (warnings != nullptr) {
    warnings->push_back(
        absl::StrCat(checked->path, ": num_nextn_predict_layers = ", depths,
                     " but the weights hold no model.layers.", layers,
                     ".eh_proj.weight: imported without multi-token prediction, as transformers "
                     "loads it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckedHfConfig> ReadCheckedHfConfig(const std::string& dir,
                                                    std::vector<std::string>* warnings) {
  CheckedHfConfig checked;
  ASSIGN_OR_RETURN(checked.hf, ReadHfConfigJson(dir));
  checked.path = JoinPath(dir, kHfConfigFile);
  ASSIGN_OR_RETURN(checked.arch, HfArchitectureOf(checked.hf, checked.path));
  RETURN_IF_ERROR(CheckHfConfigFields(checked.hf, checked.path, *checked.arch, warnings));
  if (checked.arch->mla) RETURN_IF_ERROR(DropAbsentMtpDepths(dir, &checked, warnings));
  return checked;
}

// GPT-2's config.json gives the flags not given: the sizes, the epsilon, and the
// vocabulary unless a tokenizer fixes it (a given flag is compared with the file when
// the weights are read: CheckGpt2ConfigJson). The vocabulary is not padded unless
// asked: a padding row adds a logit of 0 to every softmax, so the loss would not be
// transformers'. `hf` passed CheckHfConfigFields (its sizes are present and bounded).
void ApplyGpt2ConfigJson(const Json& hf, const HfArchitecture& arch, Config* config) {
  ModelConfig* m = config->mutable_model();
  auto size = [&](const char* key) {
    const Json* value = FindWithAliases(hf, arch, key);
    return value == nullptr ? 0 : static_cast<int32_t>(AsInt64(*value));
  };
  if (!m->has_num_layers()) m->set_num_layers(size("n_layer"));
  if (!m->has_hidden_size()) m->set_hidden_size(size("n_embd"));
  if (!m->has_num_attention_heads()) m->set_num_attention_heads(size("n_head"));
  if (!m->has_max_position_embeddings()) m->set_max_position_embeddings(size("n_positions"));
  const std::string& tokenizer = config->data().tokenizer_type();
  if (!m->has_vocab_size() && (tokenizer.empty() || tokenizer == "NullTokenizer")) {
    m->set_vocab_size(size("vocab_size"));
  }
  if (!m->has_norm_epsilon()) {
    const Json epsilon = HfFieldOrDefault(hf, arch, "layer_norm_epsilon");
    m->set_norm_epsilon(static_cast<float>(AsDouble(epsilon)));
  }
  if (!m->has_make_vocab_size_divisible_by()) m->set_make_vocab_size_divisible_by(1);
}

}  // namespace

absl::Status ExportHf(const std::string& load_dir, std::optional<int64_t> iteration,
                      const std::string& out_dir, const HfExportOptions& options,
                      HfExportSummary* summary) {
  ASSIGN_OR_RETURN(const LoadedCheckpoint checkpoint, OpenCheckpoint(load_dir, iteration));
  const Config config = checkpoint.State(0).config;
  const TensorRecord* embedding = checkpoint.FindTensor(kWordEmbedding);
  if (embedding == nullptr || embedding->global_shape_size() != 2) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", checkpoint.directory(),
                                            " has no 2-D tensor ", kWordEmbedding,
                                            ": not a GPT model checkpoint"));
  }
  if (options.gpt2_only) {
    RETURN_IF_ERROR(CheckGpt2Architecture(config))
        << "cannot export checkpoint " << checkpoint.directory() << " as hf-gpt2";
  }
  ASSIGN_OR_RETURN(const HfArchitecture* chosen,
                   HfArchitectureForExport(config, options.architecture),
                   _ << "checkpoint " << checkpoint.directory());
  const HfArchitecture& arch = *chosen;
  ASSIGN_OR_RETURN(
      const Converted converted,
      Convert(checkpoint, config, arch, options, embedding->global_shape(0)),
      _ << "cannot export checkpoint " << checkpoint.directory() << " as " << arch.class_name);

  ASSIGN_OR_RETURN(
      const HfWeightFiles files,
      WriteHfWeights(out_dir, converted.tensors, options.max_shard_bytes, options.dtype));
  if (!options.tokenizer_dir.empty()) {
    RETURN_IF_ERROR(CopyTokenizerFiles(options.tokenizer_dir, out_dir).status());
  }
  if (converted.generation_config) {
    RETURN_IF_ERROR(WriteJson(out_dir, kHfGenerationConfigFile, GenerationConfigJson(options.ids)));
  }
  RETURN_IF_ERROR(WriteJson(out_dir, kHfConfigFile, converted.config_json));

  if (summary != nullptr) {
    summary->architecture = arch.class_name;
    summary->iteration = checkpoint.iteration();
    summary->tensors = int64_t(converted.tensors.size());
    summary->parameters = 0;
    for (const auto& [name, tensor] : converted.tensors) {
      summary->parameters += int64_t(tensor.data.size());
    }
    summary->bytes = files.bytes;
    summary->files = int64_t(files.files.size()) - (files.files.size() > 1 ? 1 : 0);
  }
  return absl::OkStatus();
}

absl::Status ApplyHfConfig(const std::string& dir, Config* config,
                           std::vector<std::string>* warnings) {
  ASSIGN_OR_RETURN(const CheckedHfConfig checked, ReadCheckedHfConfig(dir, warnings));
  if (checked.arch->family == HfFamily::kGpt2) {
    ApplyGpt2ConfigJson(checked.hf, *checked.arch, config);
    return absl::OkStatus();
  }
  return ApplyLlamaConfigJson(checked.hf, checked.path, *checked.arch, config);
}

absl::StatusOr<GlobalTensorMap> ReadHf(const std::string& dir, const Config& config,
                                       const std::set<std::string>* wanted) {
  ASSIGN_OR_RETURN(const CheckedHfConfig checked, ReadCheckedHfConfig(dir, nullptr));
  const Json& hf = checked.hf;
  const std::string& path = checked.path;
  const HfArchitecture* arch = checked.arch;
  if (arch->family == HfFamily::kGpt2) {
    ASSIGN_OR_RETURN(const Gpt2Dims dims, Gpt2DimsFromConfig(config, PaddedVocabSize(config)),
                     _ << "cannot load the GPT-2 model in " << dir);
    RETURN_IF_ERROR(CheckGpt2ConfigJson(hf, path, config, dims));
    // The mask buffers may even be stored as BOOL or U8: never read.
    ASSIGN_OR_RETURN(const HfTensorMap tensors, ReadHfWeights(dir, IsGpt2MaskBuffer));
    ASSIGN_OR_RETURN(GlobalTensorMap converted, HfToConveyorGpt2(tensors, dims), _ << dir);
    return converted;
  }
  // Every flag the file fixes must hold its value: applying it again changes nothing.
  Config agreed = config;
  RETURN_IF_ERROR(ApplyLlamaConfigJson(hf, path, *arch, &agreed));
  ASSIGN_OR_RETURN(LlamaDims dims, LlamaDimsFromConfig(config, PaddedVocabSize(config)),
                   _ << "cannot load the " << arch->class_name << " model in " << dir);
  dims.mla.rope_interleave = HfRopeInterleave(hf, *arch);
  // Known tensors this rank does not need are never read; unknown ones are, to be
  // reported.
  const std::set<std::string> known = LlamaHfSources(dims, nullptr);
  const std::set<std::string> needed = LlamaHfSources(dims, wanted);
  ASSIGN_OR_RETURN(const HfTensorMap tensors, ReadHfWeights(dir, [&](const std::string& name) {
                     return IsLlamaBuffer(name) ||
                            (known.count(name) > 0 && needed.count(name) == 0);
                   }));
  ASSIGN_OR_RETURN(GlobalTensorMap converted, HfToConveyorLlama(tensors, dims, wanted), _ << dir);
  if (dims.mtp_layers > 0) {
    ASSIGN_OR_RETURN(MappedHfWeights weights, MappedHfWeights::Open(dir));
    RETURN_IF_ERROR(CheckSharedCopies(dims, &weights));
  }
  return converted;
}

absl::StatusOr<HfElementValues> ReadHfSlices(const std::string& dir, const Config& config,
                                             const HfElementRequest& request, int64_t* bytes_read) {
  ASSIGN_OR_RETURN(const CheckedHfConfig checked, ReadCheckedHfConfig(dir, nullptr));
  const Json& hf = checked.hf;
  const std::string& path = checked.path;
  const HfArchitecture* arch = checked.arch;
  ASSIGN_OR_RETURN(MappedHfWeights weights, MappedHfWeights::Open(dir));
  const HfShapeOf shape_of = [&](const std::string& name) -> const std::vector<int64_t>* {
    const SafetensorsEntry* entry = weights.Find(name);
    return entry == nullptr ? nullptr : &entry->shape;
  };
  const HfRangeReader read = [&](const std::string& name, int64_t begin, int64_t count,
                                 float* out) { return weights.Read(name, begin, count, out); };
  absl::StatusOr<HfElementValues> values;
  std::vector<std::string> unexpected;
  if (arch->family == HfFamily::kGpt2) {
    ASSIGN_OR_RETURN(const Gpt2Dims dims, Gpt2DimsFromConfig(config, PaddedVocabSize(config)),
                     _ << "cannot load the GPT-2 model in " << dir);
    RETURN_IF_ERROR(CheckGpt2ConfigJson(hf, path, config, dims));
    unexpected = UnexpectedGpt2Tensors(weights.Names(), dims);
    if (unexpected.empty()) values = HfToConveyorGpt2Elements(dims, request, shape_of, read);
  } else {
    // Every flag the file fixes must hold its value: applying it again changes nothing.
    Config agreed = config;
    RETURN_IF_ERROR(ApplyLlamaConfigJson(hf, path, *arch, &agreed));
    ASSIGN_OR_RETURN(LlamaDims dims, LlamaDimsFromConfig(config, PaddedVocabSize(config)),
                     _ << "cannot load the " << arch->class_name << " model in " << dir);
    dims.mla.rope_interleave = HfRopeInterleave(hf, *arch);
    const std::set<std::string> known = LlamaHfSources(dims, nullptr);
    for (const std::string& name : weights.Names()) {
      const bool tied_head = dims.tied && name == "lm_head.weight";
      if (known.count(name) == 0 && !tied_head && !IsLlamaBuffer(name)) {
        unexpected.push_back(name);
      }
    }
    if (unexpected.empty()) {
      values = HfToConveyorLlamaElements(dims, request, shape_of,
                                         ReadComparingSharedCopies(dims, &weights));
    }
  }
  if (!unexpected.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": tensors the configured model has no place for (more layers than config.json "
        "says, or tensors the architecture lacks?): ",
        absl::StrJoin(unexpected, ", ")));
  }
  if (!values.ok())
    return absl::Status(values.status().code(), absl::StrCat(dir, ": ", values.status().message()));
  if (absl::Status finite = weights.CheckFinite(); !finite.ok()) {
    return absl::Status(finite.code(), absl::StrCat("--load-hf ", dir, ": ", finite.message()));
  }
  if (bytes_read != nullptr) *bytes_read = weights.bytes_read();
  return values;
}

}  // namespace conveyor
