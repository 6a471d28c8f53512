#include "trainer/hf/gpt2_mapping.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "proto/config_choices.h"
#include "trainer/checkpoint/index_runs.h"

namespace conveyor {
namespace {

constexpr char kHfPrefix[] = "transformer.";

// How one tensor's storage differs between the two models.
enum class Layout {
  kSame,          // identical values and shape
  kTransposed,    // Conveyor [out, in], HF Conv1D [in, out]
  kQkvWeight,     // transposed and regrouped
  kQkvBias,       // regrouped
  kVocabRows,     // HF keeps the first `vocab` of Conveyor's padded rows
  kPositionRows,  // HF may hold more rows than Conveyor uses
};

struct TensorPair {
  std::string conveyor;
  std::string hf;  // without "transformer."
  Layout layout;
  std::vector<int64_t> conveyor_shape;
  std::vector<int64_t> hf_shape;  // on export; import accepts longer position tables
};

std::vector<TensorPair> Gpt2Pairs(const Gpt2Dims& dims) {
  const int64_t h = dims.hidden;
  const int64_t f = dims.ffn();
  std::vector<TensorPair> pairs = {
      {"embedding.word_embeddings.weight",
       "wte.weight",
       Layout::kVocabRows,
       {dims.padded_vocab, h},
       {dims.vocab, h}},
      {"embedding.position_embeddings.weight",
       "wpe.weight",
       Layout::kPositionRows,
       {dims.positions, h},
       {dims.positions, h}},
      {"final_norm.weight", "ln_f.weight", Layout::kSame, {h}, {h}},
      {"final_norm.bias", "ln_f.bias", Layout::kSame, {h}, {h}},
  };
  for (int64_t i = 0; i < dims.num_layers; ++i) {
    const std::string c = absl::StrCat("layers.", i, ".");
    const std::string hf = absl::StrCat("h.", i, ".");
    auto add = [&](const char* conveyor, const char* hf_name, Layout layout,
                   std::vector<int64_t> conveyor_shape, std::vector<int64_t> hf_shape) {
      pairs.push_back(
          {c + conveyor, hf + hf_name, layout, std::move(conveyor_shape), std::move(hf_shape)});
    };
    add("input_norm.weight", "ln_1.weight", Layout::kSame, {h}, {h});
    add("input_norm.bias", "ln_1.bias", Layout::kSame, {h}, {h});
    add("attention.qkv.weight", "attn.c_attn.weight", Layout::kQkvWeight, {3 * h, h}, {h, 3 * h});
    add("attention.qkv.bias", "attn.c_attn.bias", Layout::kQkvBias, {3 * h}, {3 * h});
    add("attention.proj.weight", "attn.c_proj.weight", Layout::kTransposed, {h, h}, {h, h});
    add("attention.proj.bias", "attn.c_proj.bias", Layout::kSame, {h}, {h});
    add("post_attention_norm.weight", "ln_2.weight", Layout::kSame, {h}, {h});
    add("post_attention_norm.bias", "ln_2.bias", Layout::kSame, {h}, {h});
    add("mlp.fc1.weight", "mlp.c_fc.weight", Layout::kTransposed, {f, h}, {h, f});
    add("mlp.fc1.bias", "mlp.c_fc.bias", Layout::kSame, {f}, {f});
    add("mlp.fc2.weight", "mlp.c_proj.weight", Layout::kTransposed, {h, f}, {f, h});
    add("mlp.fc2.bias", "mlp.c_proj.bias", Layout::kSame, {h}, {h});
  }
  return pairs;
}

std::vector<float> ToHf(const TensorPair& pair, const std::vector<float>& data,
                        const Gpt2Dims& dims) {
  switch (pair.layout) {
    case Layout::kSame:
    case Layout::kPositionRows:
      return data;
    case Layout::kTransposed:
      return Transpose(data, pair.conveyor_shape[0], pair.conveyor_shape[1]);
    case Layout::kVocabRows:
      return std::vector<float>(data.begin(), data.begin() + dims.vocab * dims.hidden);
    case Layout::kQkvBias: {
      std::vector<float> out(data.size());
      for (int64_t r = 0; r < int64_t(data.size()); ++r) {
        out[GroupedQkvRowToHfColumn(r, dims.heads, dims.head_dim())] = data[r];
      }
      return out;
    }
    case Layout::kQkvWeight: {
      const int64_t rows = 3 * dims.hidden, cols = dims.hidden;
      std::vector<float> out(data.size());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t column = GroupedQkvRowToHfColumn(r, dims.heads, dims.head_dim());
        for (int64_t i = 0; i < cols; ++i) out[i * rows + column] = data[r * cols + i];
      }
      return out;
    }
  }
  return {};
}

std::vector<float> FromHf(const TensorPair& pair, const HfTensor& tensor, const Gpt2Dims& dims) {
  const std::vector<float>& data = tensor.data;
  switch (pair.layout) {
    case Layout::kSame:
      return data;
    case Layout::kTransposed:
      return Transpose(data, pair.hf_shape[0], pair.hf_shape[1]);
    case Layout::kPositionRows:
      return std::vector<float>(data.begin(), data.begin() + dims.positions * dims.hidden);
    case Layout::kVocabRows: {
      std::vector<float> out(dims.padded_vocab * dims.hidden, 0.0f);  // padding rows: 0
      std::copy(data.begin(), data.end(), out.begin());
      return out;
    }
    case Layout::kQkvBias: {
      std::vector<float> out(data.size());
      for (int64_t c = 0; c < int64_t(data.size()); ++c) {
        out[HfColumnToGroupedQkvRow(c, dims.heads, dims.head_dim())] = data[c];
      }
      return out;
    }
    case Layout::kQkvWeight: {
      const int64_t rows = dims.hidden, cols = 3 * dims.hidden;  // HF [in, out]
      std::vector<float> out(data.size());
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t row = HfColumnToGroupedQkvRow(c, dims.heads, dims.head_dim());
          out[row * rows + i] = data[i * cols + c];
        }
      }
      return out;
    }
  }
  return {};
}

std::string WithoutPrefix(const std::string& name) {
  return absl::StartsWith(name, kHfPrefix) ? name.substr(sizeof(kHfPrefix) - 1) : name;
}

// Where HF stores element `index` of `pair`'s Conveyor tensor (flat, row-major in the
// file's shape `hf_shape`); -1 for a padding row.
int64_t HfElementOf(const TensorPair& pair, int64_t index, const Gpt2Dims& dims,
                    const std::vector<int64_t>& hf_shape) {
  switch (pair.layout) {
    case Layout::kSame:
    case Layout::kPositionRows:  // the first rows; the widths agree
      return index;
    case Layout::kVocabRows:
      return index < dims.vocab * dims.hidden ? index : -1;
    case Layout::kTransposed: {  // Conveyor [R, C] -> HF [C, R]
      const int64_t columns = pair.conveyor_shape[1];
      return (index % columns) * hf_shape[1] + index / columns;
    }
    case Layout::kQkvBias:
      return GroupedQkvRowToHfColumn(index, dims.heads, dims.head_dim());
    case Layout::kQkvWeight: {  // Conveyor [3h, h] -> HF [h, 3h], columns regrouped
      const int64_t row = index / dims.hidden, i = index % dims.hidden;
      return i * 3 * dims.hidden + GroupedQkvRowToHfColumn(row, dims.heads, dims.head_dim());
    }
  }
  return -1;
}

}  // namespace

std::vector<std::string> UnexpectedGpt2Tensors(const std::vector<std::string>& names,
                                               const Gpt2Dims& dims) {
  std::set<std::string> known;
  for (const TensorPair& pair : Gpt2Pairs(dims)) known.insert(pair.hf);
  std::vector<std::string> unexpected;
  for (const std::string& full_name : names) {
    const std::string name = WithoutPrefix(full_name);
    if (name != "lm_head.weight" && !IsGpt2MaskBuffer(name) && known.count(name) == 0) {
      unexpected.push_back(full_name);
    }
  }
  return unexpected;
}

absl::StatusOr<GlobalTensorMap> HfToConveyorGpt2Elements(
    const Gpt2Dims& dims, const std::map<std::string, std::vector<int64_t>>& wanted,
    const HfShapeOf& shape_of, const HfRangeReader& read) {
  std::map<std::string, const TensorPair*> by_name;
  const std::vector<TensorPair> pairs = Gpt2Pairs(dims);
  for (const TensorPair& pair : pairs) by_name[pair.conveyor] = &pair;
  GlobalTensorMap out;
  for (const auto& [name, indices] : wanted) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 import: the model's tensor ", name, " has no GPT-2 source"));
    }
    const TensorPair& pair = *found->second;
    std::string hf_name = kHfPrefix + pair.hf;
    const std::vector<int64_t>* shape = shape_of(hf_name);
    if (shape == nullptr) {
      hf_name = pair.hf;
      shape = shape_of(hf_name);
    }
    if (shape == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 import: tensor ", kHfPrefix, pair.hf, " is missing"));
    }
    const bool fits =
        pair.layout == Layout::kPositionRows
            ? shape->size() == 2 && (*shape)[1] == dims.hidden && (*shape)[0] >= dims.positions
            : *shape == pair.hf_shape;
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 import: tensor ", hf_name, " has shape ", FormatShape(*shape),
                       "; the configured model needs ", FormatShape(pair.hf_shape)));
    }
    std::vector<float>& values = out[name];
    values.assign(indices.size(), 0.0f);  // padding rows stay 0
    for (size_t i = 0; i < indices.size();) {
      // A run: consecutive Conveyor elements that HF stores consecutively too.
      const int64_t first = HfElementOf(pair, indices[i], dims, *shape);
      size_t end = i + 1;
      while (first >= 0 && end < indices.size() &&
             HfElementOf(pair, indices[end], dims, *shape) == first + int64_t(end - i)) {
        ++end;
      }
      if (first >= 0) RETURN_IF_ERROR(read(hf_name, first, int64_t(end - i), values.data() + i));
      i = end;
    }
  }
  return out;
}

absl::Status CheckGpt2Architecture(const Config& config) {
  const ModelConfig& m = config.model();
  std::vector<std::string> problems;
  if (ParseChoice<PositionEmbeddingType>(m.position_embedding_type()) !=
      PositionEmbeddingType::kLearnedAbsolute) {
    problems.push_back(absl::StrCat("--position-embedding-type is ", m.position_embedding_type(),
                                    "; GPT-2 uses learned_absolute positions"));
  }
  if (ParseChoice<Normalization>(m.normalization()) != Normalization::kLayerNorm) {
    problems.push_back(
        absl::StrCat("--normalization is ", m.normalization(), "; GPT-2 uses LayerNorm"));
  }
  if (m.swiglu()) {
    problems.push_back("--swiglu is set; GPT-2's MLP uses GELU: drop --swiglu");
  }
  if (m.squared_relu()) {
    problems.push_back(
        "--squared-relu is set; the GPT-2 export writes activation_function gelu_new, not "
        "squared ReLU: drop --squared-relu");
  }
  if (m.untie_embeddings_and_output_weights()) {
    problems.push_back(
        "--untie-embeddings-and-output-weights is set; GPT-2 ties the output layer to "
        "the word embedding");
  }
  if (m.disable_bias_linear()) {
    problems.push_back("--disable-bias-linear is set; GPT-2's linear layers have biases");
  }
  const int64_t heads = m.num_attention_heads();
  if (m.num_query_groups() != 0 && m.num_query_groups() != heads) {
    problems.push_back(absl::StrCat(
        "--num-query-groups is ", m.num_query_groups(), " with ", heads,
        " attention heads (grouped-query attention); GPT-2 is multi-head: one group per "
        "head"));
  }
  const int64_t hidden = m.hidden_size();
  if (m.ffn_hidden_size() != 0 && m.ffn_hidden_size() != 4 * hidden) {
    problems.push_back(absl::StrCat("--ffn-hidden-size is ", m.ffn_hidden_size(),
                                    "; GPT-2's MLP is 4 * hidden-size = ", 4 * hidden));
  }
  if (heads <= 0 || hidden % heads != 0) {
    problems.push_back(absl::StrCat("--hidden-size ", hidden,
                                    " is not a multiple of --num-attention-heads ", heads,
                                    "; GPT-2's heads split the hidden size evenly"));
  } else if (m.kv_channels() != 0 && m.kv_channels() != hidden / heads) {
    problems.push_back(absl::StrCat("--kv-channels is ", m.kv_channels(),
                                    "; GPT-2's head dimension is hidden-size / "
                                    "num-attention-heads = ",
                                    hidden / heads));
  }
  if (m.vocab_size() <= 0) {
    problems.push_back(
        "--vocab-size is unset; the Hugging Face config needs the real vocabulary size");
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the model does not have GPT-2's architecture:\n  ", absl::StrJoin(problems, "\n  ")));
}

absl::StatusOr<Gpt2Dims> Gpt2DimsFromConfig(const Config& config, int64_t padded_vocab) {
  const absl::Status architecture = CheckGpt2Architecture(config);
  if (!architecture.ok()) return architecture;
  const ModelConfig& m = config.model();
  Gpt2Dims dims;
  dims.num_layers = m.num_layers();
  dims.hidden = m.hidden_size();
  dims.heads = m.num_attention_heads();
  dims.vocab = m.vocab_size();
  dims.padded_vocab = padded_vocab;
  dims.positions = m.max_position_embeddings() != 0 ? m.max_position_embeddings() : m.seq_length();
  if (dims.num_layers <= 0 || dims.hidden <= 0 || dims.positions <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model config has ", dims.num_layers, " layers, hidden size ", dims.hidden,
                     " and ", dims.positions, " positions; all must be positive"));
  }
  if (padded_vocab < dims.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the word embedding has ", padded_vocab,
                                                   " rows, fewer than the ", dims.vocab,
                                                   " tokens of --vocab-size"));
  }
  return dims;
}

std::map<std::string, std::vector<int64_t>> GptParameterShapes(const Gpt2Dims& dims) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorPair& pair : Gpt2Pairs(dims)) shapes[pair.conveyor] = pair.conveyor_shape;
  return shapes;
}

absl::StatusOr<HfTensorMap> ConveyorToHfGpt2(const GlobalTensorMap& tensors, const Gpt2Dims& dims) {
  HfTensorMap out;
  for (const TensorPair& pair : Gpt2Pairs(dims)) {
    const auto it = tensors.find(pair.conveyor);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 export: the model has no tensor ", pair.conveyor));
    }
    if (int64_t(it->second.size()) != NumElements(pair.conveyor_shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 export: tensor ", pair.conveyor, " has ", it->second.size(),
                       " elements; its shape ", FormatShape(pair.conveyor_shape), " needs ",
                       NumElements(pair.conveyor_shape)));
    }
    out[kHfPrefix + pair.hf] = HfTensor{pair.hf_shape, ToHf(pair, it->second, dims)};
  }
  return out;
}

absl::StatusOr<GlobalTensorMap> HfToConveyorGpt2(const HfTensorMap& tensors, const Gpt2Dims& dims) {
  std::vector<std::string> names;
  for (const auto& [full_name, tensor] : tensors) names.push_back(full_name);
  const std::vector<std::string> unexpected = UnexpectedGpt2Tensors(names, dims);
  // Index the file's tensors by their name without the optional prefix.
  std::map<std::string, const HfTensor*> by_name;
  const HfTensor* lm_head = nullptr;
  const std::vector<TensorPair> pairs = Gpt2Pairs(dims);
  for (const auto& [full_name, tensor] : tensors) {
    const std::string name = WithoutPrefix(full_name);
    if (name == "lm_head.weight") {
      lm_head = &tensor;
      continue;
    }
    if (IsGpt2MaskBuffer(name)) continue;
    if (!by_name.emplace(name, &tensor).second) {
      return absl::InvalidArgumentError(absl::StrCat("GPT-2 import: tensor ", name,
                                                     " appears both with and without the \"",
                                                     kHfPrefix, "\" prefix"));
    }
  }
  if (!unexpected.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT-2 import: tensors the configured model has no place for (more layers than "
        "--num-layers ",
        dims.num_layers, ", or not a GPT-2 model?): ", absl::StrJoin(unexpected, ", ")));
  }

  GlobalTensorMap out;
  for (const TensorPair& pair : pairs) {
    const auto it = by_name.find(pair.hf);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 import: tensor ", kHfPrefix, pair.hf, " is missing"));
    }
    const HfTensor& tensor = *it->second;
    const bool fits = pair.layout == Layout::kPositionRows
                          ? tensor.shape.size() == 2 && tensor.shape[1] == dims.hidden &&
                                tensor.shape[0] >= dims.positions
                          : tensor.shape == pair.hf_shape;
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPT-2 import: tensor ", kHfPrefix, pair.hf, " has shape ",
                       FormatShape(tensor.shape), "; the configured model needs ",
                       pair.layout == Layout::kPositionRows
                           ? absl::StrCat("[>= ", dims.positions, ", ", dims.hidden,
                                          "] (lower --max-position-embeddings/--seq-length to fit)")
                           : FormatShape(pair.hf_shape)));
    }
    out[pair.conveyor] = FromHf(pair, tensor, dims);
  }
  if (lm_head != nullptr && lm_head->data != by_name.at("wte.weight")->data) {
    return absl::InvalidArgumentError(
        "GPT-2 import: lm_head.weight differs from wte.weight; Conveyor's GPT-2 ties the "
        "output layer to the word embedding, so this untied model cannot be loaded");
  }
  return out;
}

bool IsGpt2MaskBuffer(const std::string& hf_name) {
  const absl::string_view name = absl::StartsWith(hf_name, kHfPrefix)
                                     ? absl::string_view(hf_name).substr(sizeof(kHfPrefix) - 1)
                                     : absl::string_view(hf_name);
  return absl::StartsWith(name, "h.") &&
         (absl::EndsWith(name, ".attn.bias") || absl::EndsWith(name, ".attn.masked_bias"));
}

int64_t GroupedQkvRowToHfColumn(int64_t row, int64_t heads, int64_t head_dim) {
  const int64_t head = row / (3 * head_dim);
  const int64_t part = (row % (3 * head_dim)) / head_dim;  // 0 q, 1 k, 2 v
  return part * heads * head_dim + head * head_dim + row % head_dim;
}

int64_t HfColumnToGroupedQkvRow(int64_t column, int64_t heads, int64_t head_dim) {
  const int64_t part = column / (heads * head_dim);
  const int64_t head = (column % (heads * head_dim)) / head_dim;
  return head * 3 * head_dim + part * head_dim + column % head_dim;
}

std::vector<float> Transpose(const std::vector<float>& matrix, int64_t rows, int64_t cols) {
  std::vector<float> out(matrix.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = matrix[r * cols + c];
  }
  return out;
}

}  // namespace conveyor
