#include "trainer/hf/llama_mapping.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "proto/config_choices.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/hf/mla_mapping.h"
#include "trainer/hf/tensor_pairs.h"

namespace conveyor {
namespace {

// Layer `c`'s fused q/k/v projection (and biases, per-head norms) from HF's `attn`
// q_proj, k_proj, v_proj.
void AppendQkvPairs(const LlamaDims& d, const std::string& c, const std::string& attn,
                    std::vector<TensorPair>* out) {
  std::vector<TensorPair>& pairs = *out;
  const int64_t q = d.heads * d.head_dim, kv = d.groups * d.head_dim, qkv = q + 2 * kv;
  pairs.push_back({c + "attention.qkv.weight",
                   {qkv, d.hidden},
                   Rows::kGroupedQkv,
                   {attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"},
                   {{q, d.hidden}, {kv, d.hidden}, {kv, d.hidden}}});
  if (d.qkv_bias) {
    pairs.push_back({c + "attention.qkv.bias",
                     {qkv},
                     Rows::kGroupedQkv,
                     {attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"},
                     {{q}, {kv}, {kv}}});
  }
  if (d.qk_norm) {
    for (const char* kind : {"q_norm", "k_norm"}) {
      pairs.push_back({absl::StrCat(c, "attention.", kind, ".weight"),
                       {d.head_dim},
                       Rows::kSame,
                       {absl::StrCat(attn, kind, ".weight")},
                       {{d.head_dim}}});
    }
  }
}

// Transformer layer `i`'s pairs: its norms, attention and MLP (an MoE layer's when
// `moe_layer`).
void AppendLayerPairs(const LlamaDims& d, int64_t i, bool moe_layer, std::vector<TensorPair>* out) {
  std::vector<TensorPair>& pairs = *out;
  const int64_t q = d.heads * d.head_dim;
  const std::string c = absl::StrCat("layers.", i, ".");
  const std::string h = absl::StrCat("model.layers.", i, ".");
  const std::string attn = h + "self_attn.";
  pairs.push_back({c + "input_norm.weight",
                   {d.hidden},
                   Rows::kSame,
                   {h + "input_layernorm.weight"},
                   {{d.hidden}}});
  if (d.mla.enabled) {
    AppendMlaAttentionPairs(d.mla, d.hidden, d.heads, i, &pairs);
  } else {
    AppendQkvPairs(d, c, attn, &pairs);
  }
  const int64_t values = d.mla.enabled ? d.heads * d.mla.v_head_dim : q;
  pairs.push_back({c + "attention.proj.weight",
                   {d.hidden, values},
                   Rows::kSame,
                   {attn + "o_proj.weight"},
                   {{d.hidden, values}}});
  pairs.push_back({c + "post_attention_norm.weight",
                   {d.hidden},
                   Rows::kSame,
                   {h + "post_attention_layernorm.weight"},
                   {{d.hidden}}});
  if (moe_layer) {
    AppendMoeLayerPairs(d.moe, d.hidden, i, &pairs);
    return;
  }
  pairs.push_back({c + "mlp.fc1.weight",
                   {2 * d.ffn, d.hidden},
                   Rows::kGateUp,
                   {h + "mlp.gate_proj.weight", h + "mlp.up_proj.weight"},
                   {{d.ffn, d.hidden}, {d.ffn, d.hidden}}});
  pairs.push_back({c + "mlp.fc2.weight",
                   {d.hidden, d.ffn},
                   Rows::kSame,
                   {h + "mlp.down_proj.weight"},
                   {{d.hidden, d.ffn}}});
}

// Multi-token prediction depth k, stored as DeepSeek-V3 stores it: layer num_layers + k
// (a transformer layer like the model's last) with enorm, hnorm, eh_proj (its input
// [enorm(e) | hnorm(h)], Megatron's order too) and shared_head.norm (the depth's final
// norm). Its copies of the embedding and output layer are MtpSharedCopies'.
void AppendMtpPairs(const LlamaDims& d, int64_t k, std::vector<TensorPair>* pairs) {
  const int64_t i = d.num_layers + k;
  AppendLayerPairs(d, i, d.moe.IsMoeLayer(d.num_layers - 1), pairs);
  const std::string c = absl::StrCat("layers.", i, "."), h = absl::StrCat("model.layers.", i, ".");
  for (const char* norm : {"enorm", "hnorm"}) {
    pairs->push_back({absl::StrCat(c, norm, ".weight"),
                      {d.hidden},
                      Rows::kSame,
                      {absl::StrCat(h, norm, ".weight")},
                      {{d.hidden}}});
  }
  pairs->push_back({c + "eh_proj.weight",
                    {d.hidden, 2 * d.hidden},
                    Rows::kSame,
                    {h + "eh_proj.weight"},
                    {{d.hidden, 2 * d.hidden}}});
  pairs->push_back({c + "final_norm.weight",
                    {d.hidden},
                    Rows::kSame,
                    {h + "shared_head.norm.weight"},
                    {{d.hidden}}});
}

std::vector<TensorPair> LlamaPairs(const LlamaDims& d) {
  std::vector<TensorPair> pairs = {
      {"embedding.word_embeddings.weight",
       {d.padded_vocab, d.hidden},
       Rows::kVocab,
       {"model.embed_tokens.weight"},
       {{d.vocab, d.hidden}}},
      {"final_norm.weight", {d.hidden}, Rows::kSame, {"model.norm.weight"}, {{d.hidden}}},
  };
  if (!d.tied) {
    pairs.push_back({"output_layer.weight",
                     {d.padded_vocab, d.hidden},
                     Rows::kVocab,
                     {"lm_head.weight"},
                     {{d.vocab, d.hidden}}});
  }
  for (int64_t i = 0; i < d.num_layers; ++i) AppendLayerPairs(d, i, d.moe.IsMoeLayer(i), &pairs);
  for (int64_t k = 0; k < d.mtp_layers; ++k) AppendMtpPairs(d, k, &pairs);
  return pairs;
}

// The piece and row that Conveyor's row `r` of `pair` holds; nullopt for a padding row.
std::optional<std::pair<size_t, int64_t>> RowSource(const TensorPair& pair, int64_t r,
                                                    const LlamaDims& d) {
  switch (pair.rows) {
    case Rows::kSame:
      return std::make_pair(size_t{0}, r);
    case Rows::kVocab:
      if (r >= d.vocab) return std::nullopt;
      return std::make_pair(size_t{0}, r);
    case Rows::kGateUp: {
      const int64_t ffn = pair.hf_shapes[0][0];  // the gate's rows: the MLP's width
      return r < ffn ? std::make_pair(size_t{0}, r) : std::make_pair(size_t{1}, r - ffn);
    }
    case Rows::kGroupedQkv: {
      // Per group g: its heads / groups query heads, its key head, its value head.
      const int64_t per_head_group = d.heads / d.groups;
      const int64_t group_rows = (per_head_group + 2) * d.head_dim;
      const int64_t g = r / group_rows, w = r % group_rows;
      if (w < per_head_group * d.head_dim) {
        return std::make_pair(size_t{0}, g * per_head_group * d.head_dim + w);
      }
      const int64_t kv_row = w - per_head_group * d.head_dim;  // within k then v
      const size_t piece = kv_row < d.head_dim ? 1 : 2;
      return std::make_pair(piece, g * d.head_dim + kv_row % d.head_dim);
    }
    case Rows::kInterleavedRope:
      return std::make_pair(size_t{0}, InterleavedRopeRow(pair, r));
  }
  return std::nullopt;
}

// Elements per row: the product of the dimensions after the first (1 for a vector).
int64_t RowWidth(const std::vector<int64_t>& shape) {
  int64_t width = 1;
  for (size_t i = 1; i < shape.size(); ++i) width *= shape[i];
  return width;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> MtpSharedCopies(const LlamaDims& d) {
  std::vector<std::pair<std::string, std::string>> copies;
  for (int64_t k = 0; k < d.mtp_layers; ++k) {
    const std::string h = absl::StrCat("model.layers.", d.num_layers + k, ".");
    copies.emplace_back(h + "embed_tokens.weight", "model.embed_tokens.weight");
    copies.emplace_back(h + "shared_head.head.weight",
                        d.tied ? "model.embed_tokens.weight" : "lm_head.weight");
  }
  return copies;
}

absl::StatusOr<LlamaDims> LlamaDimsFromConfig(const Config& config, int64_t padded_vocab) {
  const ModelConfig& m = config.model();
  std::vector<std::string> problems;
  const std::optional<PositionEmbeddingType> positions =
      ParseChoice<PositionEmbeddingType>(m.position_embedding_type());
  if (positions != PositionEmbeddingType::kRope && positions != PositionEmbeddingType::kYarn) {
    problems.push_back("--position-embedding-type is not rope; Llama-family models use RoPE");
  }
  if (ParseChoice<Normalization>(m.normalization()) != Normalization::kRmsNorm) {
    problems.push_back("--normalization is not RMSNorm; Llama-family models use RMSNorm");
  }
  if (!m.swiglu()) problems.push_back("--swiglu is unset; Llama-family MLPs are SwiGLU");
  if (!m.disable_bias_linear()) {
    problems.push_back(
        "--disable-bias-linear is unset; Llama-family linears have no biases (Qwen2's q/k/v "
        "biases: --add-qkv-bias)");
  }
  if (m.rotary_percent() != 1.0f) {
    problems.push_back("--rotary-percent is not 1; Llama-family models rotate every channel");
  }
  if (m.vocab_size() <= 0) {
    problems.push_back("--vocab-size is unset; the Hugging Face config needs the real size");
  }
  const HfMoeDims moe = HfMoeDimsFromConfig(m, &problems);
  const HfMlaDims mla = HfMlaDimsFromConfig(m, &problems);
  if (m.mtp_num_layers() > 0 && !m.multi_latent_attention()) {
    problems.push_back(
        "--mtp-num-layers is set; of the Hugging Face architectures only DeepseekV3ForCausalLM "
        "stores multi-token prediction modules (with --multi-latent-attention)");
  }
  if (!problems.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no Llama-family Hugging Face architecture computes this model:\n  ",
                     absl::StrJoin(problems, "\n  ")));
  }
  LlamaDims d;
  d.num_layers = m.num_layers();
  d.hidden = m.hidden_size();
  d.heads = m.num_attention_heads();
  d.groups = m.num_query_groups() > 0 ? m.num_query_groups() : d.heads;
  d.head_dim = m.kv_channels() > 0 ? m.kv_channels() : (d.heads > 0 ? d.hidden / d.heads : 0);
  d.ffn = m.ffn_hidden_size() > 0 ? m.ffn_hidden_size() : 4 * d.hidden;
  d.vocab = m.vocab_size();
  d.padded_vocab = padded_vocab;
  d.tied = !m.untie_embeddings_and_output_weights();
  d.qkv_bias = m.add_qkv_bias();
  d.qk_norm = m.qk_layernorm();
  d.moe = moe;
  d.mla = mla;
  d.mtp_layers = m.mtp_num_layers();
  if (mla.enabled) d.groups = d.heads;  // one query group per head (ModelShape::UseMla)
  if (d.num_layers <= 0 || d.hidden <= 0 || d.heads <= 0 || d.groups <= 0 ||
      d.heads % d.groups != 0 || d.head_dim <= 0 || padded_vocab < d.vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model config has ", d.num_layers, " layers, hidden ", d.hidden, ", ", d.heads,
        " heads in ", d.groups, " groups of head dimension ", d.head_dim, " and ", padded_vocab,
        " embedding rows for ", d.vocab, " tokens: not a valid Llama-family model"));
  }
  return d;
}

std::map<std::string, std::vector<int64_t>> LlamaParameterShapes(const LlamaDims& dims) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorPair& pair : LlamaPairs(dims)) shapes[pair.conveyor] = pair.conveyor_shape;
  return shapes;
}

absl::StatusOr<HfTensorMap> ConveyorToHfLlama(const GlobalTensorMap& tensors,
                                              const LlamaDims& dims) {
  HfTensorMap out;
  for (const TensorPair& pair : LlamaPairs(dims)) {
    const auto it = tensors.find(pair.conveyor);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("export: the model has no tensor ", pair.conveyor));
    }
    const std::vector<float>& data = it->second;
    if (int64_t(data.size()) != NumElements(pair.conveyor_shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "export: tensor ", pair.conveyor, " has ", data.size(), " elements; its shape ",
          FormatShape(pair.conveyor_shape), " needs ", NumElements(pair.conveyor_shape)));
    }
    std::vector<HfTensor*> pieces;
    for (size_t p = 0; p < pair.hf.size(); ++p) {
      HfTensor& piece = out[pair.hf[p]];
      piece.shape = pair.hf_shapes[p];
      piece.data.assign(NumElements(piece.shape), 0.0f);
      pieces.push_back(&piece);
    }
    const int64_t width = RowWidth(pair.conveyor_shape);
    for (int64_t r = 0; r < pair.conveyor_shape[0]; ++r) {
      const auto source = RowSource(pair, r, dims);
      if (!source.has_value()) continue;  // vocabulary padding
      std::copy(data.begin() + r * width, data.begin() + (r + 1) * width,
                pieces[source->first]->data.begin() + source->second * width);
    }
  }
  for (const auto& [copy, source] : MtpSharedCopies(dims)) out[copy] = out.at(source);
  return out;
}

std::set<std::string> LlamaHfSources(const LlamaDims& dims, const std::set<std::string>* wanted) {
  std::set<std::string> sources;
  for (const TensorPair& pair : LlamaPairs(dims)) {
    if (wanted == nullptr || wanted->count(pair.conveyor) > 0) {
      sources.insert(pair.hf.begin(), pair.hf.end());
    }
  }
  // Known, never read: the copies hold what their originals do.
  if (wanted == nullptr) {
    for (const auto& copy : MtpSharedCopies(dims)) sources.insert(copy.first);
  }
  return sources;
}

absl::StatusOr<GlobalTensorMap> HfToConveyorLlama(const HfTensorMap& tensors, const LlamaDims& dims,
                                                  const std::set<std::string>* wanted) {
  const std::vector<TensorPair> pairs = LlamaPairs(dims);
  const std::set<std::string> known = LlamaHfSources(dims, nullptr);
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : tensors) {
    const bool tied_head = dims.tied && name == "lm_head.weight";
    if (known.count(name) == 0 && !tied_head && !IsLlamaBuffer(name)) unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "import: tensors the configured model has no place for (more layers than config.json "
        "says, or biases the architecture lacks?): ",
        absl::StrJoin(unexpected, ", ")));
  }
  GlobalTensorMap out;
  for (const TensorPair& pair : pairs) {
    if (wanted != nullptr && wanted->count(pair.conveyor) == 0) continue;
    std::vector<const HfTensor*> pieces;
    for (size_t p = 0; p < pair.hf.size(); ++p) {
      const auto it = tensors.find(pair.hf[p]);
      if (it == tensors.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("import: tensor ", pair.hf[p], " is missing"));
      }
      if (it->second.shape != pair.hf_shapes[p]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "import: tensor ", pair.hf[p], " has shape ", FormatShape(it->second.shape),
            "; config.json's model needs ", FormatShape(pair.hf_shapes[p])));
      }
      pieces.push_back(&it->second);
    }
    std::vector<float>& data = out[pair.conveyor];
    data.assign(NumElements(pair.conveyor_shape), 0.0f);  // padding rows stay 0
    const int64_t width = RowWidth(pair.conveyor_shape);
    for (int64_t r = 0; r < pair.conveyor_shape[0]; ++r) {
      const auto source = RowSource(pair, r, dims);
      if (!source.has_value()) continue;
      const std::vector<float>& from = pieces[source->first]->data;
      std::copy(from.begin() + source->second * width, from.begin() + (source->second + 1) * width,
                data.begin() + r * width);
    }
  }
  const auto head = tensors.find("lm_head.weight");
  const auto embedding = tensors.find("model.embed_tokens.weight");
  if (dims.tied && head != tensors.end() && embedding != tensors.end() &&
      head->second.data != embedding->second.data) {
    return absl::InvalidArgumentError(
        "import: lm_head.weight differs from model.embed_tokens.weight but config.json says "
        "tie_word_embeddings = true");
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::vector<float>>> HfToConveyorLlamaElements(
    const LlamaDims& dims, const std::map<std::string, std::vector<int64_t>>& wanted,
    const HfShapeOf& shape_of, const HfRangeReader& read) {
  std::map<std::string, const TensorPair*> by_name;
  const std::vector<TensorPair> pairs = LlamaPairs(dims);
  for (const TensorPair& pair : pairs) by_name[pair.conveyor] = &pair;
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, indices] : wanted) {
    const auto found = by_name.find(name);
    if (found == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("import: the model's tensor ", name, " has no Hugging Face source"));
    }
    const TensorPair& pair = *found->second;
    for (size_t p = 0; p < pair.hf.size(); ++p) {
      const std::vector<int64_t>* shape = shape_of(pair.hf[p]);
      if (shape == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("import: tensor ", pair.hf[p], " is missing"));
      }
      if (*shape != pair.hf_shapes[p]) {
        return absl::InvalidArgumentError(
            absl::StrCat("import: tensor ", pair.hf[p], " has shape ", FormatShape(*shape),
                         "; config.json's model needs ", FormatShape(pair.hf_shapes[p])));
      }
    }
    const int64_t width = RowWidth(pair.conveyor_shape);
    std::vector<float>& values = out[name];
    values.assign(indices.size(), 0.0f);  // padding rows stay 0
    for (size_t i = 0; i < indices.size();) {
      // A run: indices consecutive within one row.
      const int64_t row = indices[i] / width, column = indices[i] % width;
      size_t end = i + 1;
      while (end < indices.size() && indices[end] == indices[end - 1] + 1 &&
             indices[end] / width == row) {
        ++end;
      }
      const auto source = RowSource(pair, row, dims);
      if (source.has_value()) {
        RETURN_IF_ERROR(read(pair.hf[source->first], source->second * width + column,
                             int64_t(end - i), values.data() + i));
      }
      i = end;
    }
  }
  return out;
}

bool IsLlamaBuffer(const std::string& hf_name) {
  return absl::EndsWith(hf_name, ".rotary_emb.inv_freq");
}

}  // namespace conveyor
