#include "trainer/hf/hf_config_table.h"

#include <cstdint>

namespace conveyor {

const char kHfConfigFieldsPreamble[] =
    "# Hugging Face config.json fields\n"
    "\n"
    "What `--load-hf DIR` does with each field of `DIR/config.json`, per architecture, from\n"
    "transformers' configuration classes (`GPT2Config`, `LlamaConfig`, `MistralConfig`,\n"
    "`Qwen2Config`, `Qwen3Config`, `MixtralConfig`, `Qwen2MoeConfig`, `Qwen3MoeConfig`,\n"
    "`DeepseekV3Config`) and\n"
    "their modeling files. Generated from the tables in\n"
    "`trainer/hf/hf_config_table.cc` (a test keeps this file equal to them).\n"
    "\n"
    "- **honoured**: the field sets the Conveyor flag named. A flag given on the command\n"
    "  line that disagrees is refused: at once for the Llama family, when the weights are\n"
    "  read for GPT-2. The vocabulary is not padded unless --make-vocab-size-divisible-by\n"
    "  is given (a padding row would add a logit of 0 to every softmax).\n"
    "  A field absent from the file takes transformers' default, as transformers does.\n"
    "- **refused unless** *v*: a value other than *v* changes the model in a way Conveyor\n"
    "  does not compute; the run stops (exit 2) naming the field, its value and *v*.\n"
    "- **ignored**: the model's function cannot depend on the field (the reason is given).\n"
    "\n"
    "Every present field must have the JSON type transformers expects (`\"64\"` is not an\n"
    "integer, nor is `64.5`). Sizes must be positive and at most the bound given, the\n"
    "limit the matching flag has (`trainer/config/size_limits.h`: far above any published model),\n"
    "so that a damaged or hand-edited file is refused before anything is built for it.\n"
    "A field not listed here is named in one warning line and not applied.\n";

namespace {

constexpr char kDropout[] =
    "dropout, applied in training only: Conveyor's --attention-dropout and --hidden-dropout "
    "decide, as in any run; the model's function (and a loss without dropout) does not "
    "depend on it";
constexpr char kInitializer[] =
    "initialises weights that are not in the file; --load-hf reads every weight from it";

HfConfigField Field(std::string key, HfFieldUse use, HfJsonType type, std::string hf_default,
                    std::string note) {
  HfConfigField f;
  f.key = std::move(key);
  f.use = use;
  f.type = type;
  f.hf_default = std::move(hf_default);
  f.note = std::move(note);
  return f;
}

HfConfigField Size(std::string key, std::string hf_default, const SizeLimit& limit,
                   std::string note, bool required) {
  HfConfigField f = Field(std::move(key), HfFieldUse::kHonoured, HfJsonType::kInteger,
                          std::move(hf_default), std::move(note));
  f.limit = &limit;
  f.required = required;
  return f;
}

HfConfigField Honoured(std::string key, HfJsonType type, std::string hf_default, std::string note) {
  return Field(std::move(key), HfFieldUse::kHonoured, type, std::move(hf_default), std::move(note));
}

HfConfigField Refused(std::string key, HfJsonType type, std::string hf_default,
                      std::vector<std::string> allowed, std::string note) {
  HfConfigField f = Field(std::move(key), HfFieldUse::kRefusedUnlessAllowed, type,
                          std::move(hf_default), std::move(note));
  f.allowed = std::move(allowed);
  return f;
}

HfConfigField Ignored(std::string key, std::string hf_default, std::string note) {
  return Field(std::move(key), HfFieldUse::kIgnored, HfJsonType::kAny, std::move(hf_default),
               std::move(note));
}

HfConfigField Alias(std::string key, const std::string& of, const SizeLimit& limit,
                    const std::string& config_class = "GPT2Config") {
  HfConfigField f = Field(std::move(key), HfFieldUse::kHonoured, HfJsonType::kInteger, "",
                          "another name of " + of + " (" + config_class +
                              ".attribute_map), read as it");
  f.limit = &limit;
  f.alias_of = of;
  return f;
}

std::vector<HfConfigField> Gpt2Fields() {
  using T = HfJsonType;
  return {
      Size("vocab_size", "50257", kMaxVocabulary,
           "--vocab-size unless a tokenizer fixes it; the tokenizer's must equal it", true),
      Size("n_positions", "1024", kMaxSequence,
           "--max-position-embeddings; a given one may be smaller (the rows Conveyor uses are "
           "imported)",
           true),
      Size("n_embd", "768", kMaxHidden, "--hidden-size", true),
      Size("n_layer", "12", kMaxLayers, "--num-layers", true),
      Size("n_head", "12", kMaxHeads, "--num-attention-heads", true),
      Alias("hidden_size", "n_embd", kMaxHidden),
      Alias("num_hidden_layers", "n_layer", kMaxLayers),
      Alias("num_attention_heads", "n_head", kMaxHeads),
      Alias("max_position_embeddings", "n_positions", kMaxSequence),
      [] {
        HfConfigField f = Honoured("n_inner", T::kIntegerOrNull, "null",
                                   "null or 4 * n_embd (Conveyor's GPT-2 MLP); other "
                                   "values are refused");
        f.limit = &kMaxFfnHidden;
        return f;
      }(),
      Refused("activation_function", T::kString, "\"gelu_new\"", {"\"gelu_new\""},
              "Conveyor's GELU is the tanh form, transformers' gelu_new"),
      Honoured("layer_norm_epsilon", T::kNumber, "1e-05", "--norm-epsilon"),
      Refused("tie_word_embeddings", T::kBool, "true", {"true"},
              "Conveyor's GPT-2 ties the output layer to wte"),
      Refused("scale_attn_weights", T::kBool, "true", {"true"},
              "false drops the 1/sqrt(head_dim) scaling of the attention scores; Conveyor's "
              "attention always applies it"),
      Refused("scale_attn_by_inverse_layer_idx", T::kBool, "false", {"false"},
              "true divides the attention scores of layer i by i + 1; Conveyor's attention "
              "has no per-layer scale"),
      Refused("add_cross_attention", T::kBool, "false", {"false"},
              "cross-attention to an encoder's states; Conveyor's GPT is decoder-only"),
      Ignored("reorder_and_upcast_attn", "false",
              "reorders and upcasts fp16 attention (scale before the product, fp32 softmax): "
              "the same function; Conveyor's softmax runs in fp32"),
      Ignored("resid_pdrop", "0.1", kDropout),
      Ignored("embd_pdrop", "0.1", kDropout),
      Ignored("attn_pdrop", "0.1", kDropout),
      Ignored("initializer_range", "0.02", kInitializer),
      Ignored("n_ctx", "", "transformers 2's name of the context length, no longer read"),
      Ignored("summary_type", "\"cls_index\"", "GPT2DoubleHeadsModel's multiple-choice head"),
      Ignored("summary_use_proj", "true", "GPT2DoubleHeadsModel's multiple-choice head"),
      Ignored("summary_activation", "null", "GPT2DoubleHeadsModel's multiple-choice head"),
      Ignored("summary_proj_to_labels", "true", "GPT2DoubleHeadsModel's multiple-choice head"),
      Ignored("summary_first_dropout", "0.1", "GPT2DoubleHeadsModel's multiple-choice head"),
  };
}

// transformers' defaults of the Llama-family configs where they differ.
struct LlamaDefaults {
  const char* vocab = "151936";
  const char* hidden = "4096";
  const char* ffn = "22016";
  const char* layers = "32";
  const char* heads = "32";
  const char* kv_heads = "32";
  const char* positions = "32768";
  const char* eps = "1e-06";
  const char* theta = "10000.0";
};

LlamaDefaults DefaultsOf(const std::string& model_type) {
  LlamaDefaults d;
  if (model_type == "llama") {
    d.vocab = "32000", d.ffn = "11008", d.kv_heads = "null", d.positions = "2048";
  } else if (model_type == "mistral") {
    d.vocab = "32000", d.ffn = "14336", d.kv_heads = "8", d.positions = "131072";
  } else if (model_type == "mixtral") {
    d.vocab = "32000", d.ffn = "14336", d.kv_heads = "8", d.positions = "131072";
    d.eps = "1e-05", d.theta = "1000000.0";
  } else if (model_type == "qwen2_moe") {
    d.hidden = "2048", d.ffn = "5632", d.layers = "24", d.heads = "16", d.kv_heads = "16";
  } else if (model_type == "qwen3_moe") {
    d.hidden = "2048", d.ffn = "6144", d.layers = "24", d.kv_heads = "4";
  } else if (model_type == "deepseek_v3") {
    d.vocab = "129280", d.hidden = "7168", d.ffn = "18432", d.layers = "61", d.heads = "128";
    d.kv_heads = "128", d.positions = "4096";
  }
  return d;
}

// The fields of every Llama-family config; `model_type`'s defaults where they differ.
std::vector<HfConfigField> LlamaFamilyFields(const std::string& model_type) {
  using T = HfJsonType;
  const LlamaDefaults d = DefaultsOf(model_type);
  return {
      Size("vocab_size", d.vocab, kMaxVocabulary, "--vocab-size", true),
      Size("hidden_size", d.hidden, kMaxHidden, "--hidden-size", true),
      Size("intermediate_size", d.ffn, kMaxFfnHidden,
           model_type == "mixtral" ? "--ffn-hidden-size and --moe-ffn-hidden-size (each expert's)"
                                   : "--ffn-hidden-size",
           true),
      Size("num_hidden_layers", d.layers, kMaxLayers, "--num-layers", true),
      Size("num_attention_heads", d.heads, kMaxHeads, "--num-attention-heads", true),
      [&] {
        HfConfigField f = Honoured(
            "num_key_value_heads", T::kIntegerOrNull, d.kv_heads,
            model_type == "deepseek_v3"
                ? "null or num_attention_heads, else refused (multi-latent attention has a key "
                  "and value per head; DeepseekV3Attention would repeat them)"
                : "--num-query-groups (null: num_attention_heads)");
        f.limit = &kMaxHeads;
        return f;
      }(),
      [&] {
        HfConfigField f =
            Honoured("head_dim", model_type == "qwen3" ? T::kInteger : T::kIntegerOrNull,
                     model_type == "qwen3"         ? "128"
                     : model_type == "deepseek_v3" ? ""
                                                   : "null",
                     model_type == "deepseek_v3"
                         ? "transformers' RoPE width, derived as qk_rope_head_dim; another "
                           "value is refused"
                         : "--kv-channels (null: hidden_size / num_attention_heads)");
        f.limit = &kMaxHeads;
        return f;
      }(),
      Size("max_position_embeddings", d.positions, kMaxSequence,
           "--max-position-embeddings (with RoPE a length limit, no table)", false),
      Honoured("rms_norm_eps", T::kNumber, d.eps, "--norm-epsilon"),
      Honoured("tie_word_embeddings", T::kBool, "false",
               "--untie-embeddings-and-output-weights when false"),
      Refused("hidden_act", T::kString, "\"silu\"", {"\"silu\"", "\"swish\""},
              "Conveyor's gated MLP is SwiGLU; transformers' swish is the same SiLU"),
      Honoured("rope_theta", T::kNumber, d.theta,
               "--rotary-base (transformers 4; 5 keeps it in rope_parameters)"),
      Honoured("rope_parameters", T::kObjectOrNull, "null",
               "its rope_theta sets --rotary-base; rope_type \"llama3\" sets --use-rope-scaling "
               "and --rope-scaling-factor, -low-freq-factor, -high-freq-factor and "
               "-original-max-position-embeddings from its four numbers; \"yarn\" sets "
               "--position-embedding-type yarn, --rotary-scaling-factor (factor, or "
               "max_position_embeddings / original_max_position_embeddings without one; "
               "refused when both disagree, as transformers 4 and 5 read them differently), "
               "--yarn-original-max-position-embeddings, --yarn-beta-fast/-slow, --mscale and "
               "--mscale-all-dim (both only when both are nonzero, as transformers reads them), "
               "--yarn-correction-range-round-to-int (truncate); an attention_factor other "
               "than that concentration factor is refused; other types (linear, dynamic, "
               "longrope) are refused, and so are parameters nested per layer type (one RoPE "
               "for all layers)"),
      Honoured("rope_scaling", T::kObjectOrNull, "null",
               "transformers 4's rope_parameters, read the same way"),
      Ignored("partial_rotary_factor", "null",
              "this family's default RoPE rotates every channel of head_dim whatever it says"),
      Ignored("attention_dropout", "0.0", kDropout),
      Ignored("initializer_range", "0.02", kInitializer),
  };
}

// The fields only some of the Llama family have.
std::vector<HfConfigField> LlamaVariantFields(const std::string& model_type) {
  using T = HfJsonType;
  std::vector<HfConfigField> fields;
  if (model_type == "llama") {
    fields.push_back(Refused("attention_bias", T::kBool, "false", {"false"},
                             "Conveyor's Llama linears have no biases"));
    fields.push_back(
        Refused("mlp_bias", T::kBool, "false", {"false"}, "Conveyor's Llama MLP has no biases"));
    fields.push_back(Ignored("pretraining_tp", "1",
                             "transformers 4 computed the linear layers in this many slices: "
                             "the same products; 5 no longer reads it"));
    return fields;
  }
  if (model_type == "deepseek_v3") {
    fields.push_back(Refused("attention_bias", T::kBool, "false", {"false"},
                             "Conveyor's multi-latent attention has no biases"));
    fields.push_back(Ignored("pretraining_tp", "1",
                             "transformers 4 computed the linear layers in this many slices: "
                             "the same products"));
    fields.push_back(Honoured("rope_interleave", T::kBool, "true",
                              "true: the rotated rows of q_b_proj (q_proj) and "
                              "kv_a_proj_with_mqa are stored as interleaved pairs, permuted to "
                              "Conveyor's halves on import and back on export; false: in halves"));
    return fields;
  }
  if (model_type == "mistral" || model_type == "mixtral") {
    fields.push_back(Honoured("sliding_window", T::kIntegerOrNull,
                              model_type == "mistral" ? "4096" : "null",
                              "every layer attends to this many keys (the query's own and "
                              "those before it): --window-size sliding_window - 1,0 when "
                              "shorter than --seq-length, else plain causal attention; null: "
                              "no window"));
    return fields;
  }
  if (model_type == "qwen3" || model_type == "qwen3_moe") {
    fields.push_back(Refused("attention_bias", T::kBool, "false", {"false"},
                             "Conveyor's Qwen3 attention has no biases"));
  }
  if (model_type == "qwen2_moe") {
    fields.push_back(Refused("qkv_bias", T::kBool, "true", {"true"},
                             "q/k/v biases (--add-qkv-bias); Conveyor's Qwen2-MoE has them"));
  }
  fields.push_back(Honoured("sliding_window", T::kIntegerOrNull, "4096",
                            "the window of the layers that slide (use_sliding_window): "
                            "--window-size sliding_window - 1,0 when shorter than "
                            "--seq-length (refused for the MoE classes), else plain causal "
                            "attention"));
  fields.push_back(Honoured("use_sliding_window", T::kBool, "false",
                            "whether layers from max_window_layers on slide (see sliding_window)"));
  fields.push_back(Honoured("max_window_layers", T::kInteger, "28",
                            "layers from this index on slide when use_sliding_window: "
                            "--window-attn-skip-freq as a list when some do not"));
  fields.push_back(Honoured("layer_types", T::kArrayOrNull, "null",
                            "per layer \"full_attention\" or \"sliding_attention\" (see "
                            "sliding_window), read over max_window_layers; another kind is "
                            "refused"));
  return fields;
}

// DeepseekV3Config's fields of multi-latent attention, routing and multi-token prediction,
// and those of DeepSeek's own configuration file that transformers keeps.
std::vector<HfConfigField> DeepseekFields() {
  using T = HfJsonType;
  constexpr char kTrainingLoss[] =
      "the weight or kind of DeepSeek's auxiliary balance loss in training: Conveyor's "
      "--moe-aux-loss-coeff and --moe-router-load-balancing-type decide, as in any run; the "
      "model's function does not depend on it";
  return {
      Size("n_routed_experts", "256", kMaxExperts, "--num-experts", false),
      Alias("num_local_experts", "n_routed_experts", kMaxExperts, "DeepseekV3Config"),
      Size("num_experts_per_tok", "8", kMaxExperts, "--moe-router-topk", false),
      Size("moe_intermediate_size", "2048", kMaxFfnHidden, "--moe-ffn-hidden-size", false),
      Honoured("n_shared_experts", T::kInteger, "1",
               "--moe-shared-expert-intermediate-size n_shared_experts * "
               "moe_intermediate_size (the shared experts are one SwiGLU MLP that wide, no "
               "gate)"),
      Honoured("routed_scaling_factor", T::kNumber, "2.5", "--moe-router-topk-scaling-factor"),
      Size("n_group", "8", kMaxExperts,
           "--moe-router-num-groups when topk_group < n_group > 1 (else no group limit)", false),
      Size("topk_group", "4", kMaxExperts,
           "--moe-router-group-topk, with --moe-router-group-score-topk 2 (DeepSeek-V3 "
           "scores a group by its two best experts, Megatron by its num_experts_per_tok / "
           "topk_group best)",
           false),
      Honoured("norm_topk_prob", T::kBool, "true",
               "refused unless true exactly when num_experts_per_tok > 1 (Conveyor's sigmoid "
               "router renormalises then, as Megatron's)"),
      Honoured("first_k_dense_replace", T::kInteger, "3",
               "layers before it have a dense MLP of intermediate_size: --moe-layer-freq as "
               "a list"),
      [] {
        HfConfigField f = Honoured("q_lora_rank", T::kIntegerOrNull, "1536",
                                   "--q-lora-rank (null: 0, q_proj from the hidden state)");
        f.limit = &kMaxHidden;
        return f;
      }(),
      Size("kv_lora_rank", "512", kMaxHidden, "--kv-lora-rank", false),
      Size("qk_nope_head_dim", "128", kMaxHidden, "--qk-head-dim", false),
      Size("qk_rope_head_dim", "64", kMaxHidden, "--qk-pos-emb-head-dim", false),
      Size("v_head_dim", "128", kMaxHidden, "--v-head-dim", false),
      Honoured("qk_head_dim", T::kIntegerOrNull, "",
               "derived as qk_nope_head_dim + qk_rope_head_dim; another value is refused"),
      Refused("scoring_func", T::kString, "\"sigmoid\"", {"\"sigmoid\""},
              "DeepSeek-V3's router scores (--moe-router-score-function sigmoid)"),
      Refused("topk_method", T::kString, "\"noaux_tc\"", {"\"noaux_tc\""},
              "DeepSeek-V3's choice with the expert bias (e_score_correction_bias); V2's "
              "greedy methods are not Conveyor's router"),
      Refused("moe_layer_freq", T::kInteger, "1", {"1"},
              "DeepSeek's every-Nth-layer MoE; transformers' DeepseekV3 makes every layer from "
              "first_k_dense_replace on MoE"),
      Honoured("num_nextn_predict_layers", T::kInteger, "0",
               "--mtp-num-layers: the multi-token prediction depths stored as "
               "model.layers.{num_hidden_layers + k} (enorm, hnorm, eh_proj, a layer like the "
               "last, shared_head.norm; their embed_tokens and shared_head.head copies are not "
               "read and are written back from the model's); transformers skips them"),
      Ignored("aux_loss_alpha", "0.001", kTrainingLoss),
      Ignored("seq_aux", "true", kTrainingLoss),
      Ignored("ep_size", "1", "DeepSeek's inference code's expert parallelism: a layout"),
      Ignored("output_router_logits", "false",
              "whether HF's forward returns the router logits: outputs, not the model's "
              "function"),
  };
}

// The mixture-of-experts fields (Mixtral, Qwen2-MoE, Qwen3-MoE; none for dense models).
std::vector<HfConfigField> MoeFields(const std::string& model_type) {
  if (model_type == "deepseek_v3") return DeepseekFields();
  using T = HfJsonType;
  constexpr char kAuxLoss[] =
      "the weight of transformers' load-balancing loss in training (with "
      "output_router_logits): Conveyor's --moe-aux-loss-coeff decides, as in any run; the "
      "model's function does not depend on it";
  const bool mixtral = model_type == "mixtral", qwen2 = model_type == "qwen2_moe";
  if (!mixtral && !qwen2 && model_type != "qwen3_moe") return {};
  std::vector<HfConfigField> fields = {
      Size(mixtral ? "num_local_experts" : "num_experts",
           mixtral ? "8"
           : qwen2 ? "60"
                   : "128",
           kMaxExperts, "--num-experts", false),
      Size("num_experts_per_tok",
           mixtral ? "2"
           : qwen2 ? "4"
                   : "8",
           kMaxExperts, "--moe-router-topk", false),
      Ignored("router_aux_loss_coef", "0.001", kAuxLoss),
      Ignored("output_router_logits", "false",
              "whether HF's forward returns the router logits and adds its load-balancing "
              "loss in training: outputs, not the model's function (see router_aux_loss_coef)"),
  };
  if (!qwen2) {  // transformers 5 writes Qwen3-MoE's count as num_local_experts
    fields.push_back(Alias(mixtral ? "num_experts" : "num_local_experts",
                           mixtral ? "num_local_experts" : "num_experts", kMaxExperts,
                           mixtral ? "MixtralConfig" : "Qwen3MoeConfig"));
  }
  if (mixtral) {
    fields.push_back(Refused("router_jitter_noise", T::kNumber, "0.0", {"0"},
                             "multiplies the MoE input by uniform noise in training; "
                             "Conveyor's router has no input jitter"));
    return fields;
  }
  fields.push_back(Size("moe_intermediate_size", qwen2 ? "1408" : "768", kMaxFfnHidden,
                        "--moe-ffn-hidden-size", false));
  fields.push_back(Honoured("norm_topk_prob", T::kBool, "false",
                            "true renormalises the top-k weights to sum 1; false: "
                            "--moe-router-pre-softmax (softmax over every expert)"));
  fields.push_back(Honoured("decoder_sparse_step", T::kInteger, "1",
                            "layer i is MoE when (i + 1) % step == 0 and it is not in "
                            "mlp_only_layers: --moe-layer-freq as a list"));
  fields.push_back(Honoured("mlp_only_layers", T::kArrayOrNull, "[]",
                            "layer indices with a dense MLP of intermediate_size: "
                            "--moe-layer-freq as a list"));
  if (qwen2) {
    fields.push_back(Size("shared_expert_intermediate_size", "5632", kMaxFfnHidden,
                          "--moe-shared-expert-intermediate-size, with --moe-shared-expert-gate "
                          "(its output scaled by sigmoid(x shared_expert_gate))",
                          false));
  }
  return fields;
}

}  // namespace

std::vector<HfConfigField> HfFamilyFields(const std::string& model_type) {
  if (model_type == "gpt2") return Gpt2Fields();
  std::vector<HfConfigField> fields = LlamaFamilyFields(model_type);
  for (HfConfigField& f : LlamaVariantFields(model_type)) fields.push_back(std::move(f));
  for (HfConfigField& f : MoeFields(model_type)) fields.push_back(std::move(f));
  return fields;
}

std::vector<HfConfigField> HfCommonFields() {
  using T = HfJsonType;
  constexpr char kProvenance[] = "provenance";
  constexpr char kOutputs[] = "which outputs HF's forward returns, not what it computes";
  constexpr char kHeads[] = "classification heads (...ForSequenceClassification), not the LM";
  constexpr char kGeneration[] = "generation settings (transformers 4 kept them here)";
  return {
      Honoured("architectures", T::kStringArray, "null",
               "picks the architecture and weight layout; must agree with model_type"),
      Honoured("model_type", T::kString, "", "picks this table; must agree with architectures"),
      Refused("is_encoder_decoder", T::kBool, "false", {"false"},
              "Conveyor trains decoder-only models"),
      Refused("pruned_heads", T::kObjectOrNull, "{}", {"{}", "null"},
              "pruned heads change the attention layers' shapes; Conveyor's keep every head"),
      Refused("quantization_config", T::kObjectOrNull, "null", {"null"},
              "quantized weights (GPTQ, AWQ, bitsandbytes, FP8) are not the floating-point "
              "tensors Conveyor reads"),
      Ignored("torch_dtype", "null",
              "the weights' storage type: Conveyor reads each tensor's dtype from the "
              "safetensors header and widens F16 and BF16 to fp32 exactly"),
      Ignored("dtype", "null", "transformers 5's name of torch_dtype"),
      Ignored("transformers_version", "null", kProvenance),
      Ignored("_name_or_path", "\"\"", kProvenance),
      Ignored("use_cache", "true", "generation's key/value cache; a full forward pass has none"),
      Ignored("bos_token_id", "", "a tokenizer id, not part of the model's function"),
      Ignored("eos_token_id", "", "a tokenizer id, not part of the model's function"),
      Ignored("pad_token_id", "null",
              "HF's padding_idx: the forward pass is unchanged (HF freezes that embedding row "
              "in training; Conveyor trains every row, as Megatron does)"),
      Ignored("sep_token_id", "null", "a tokenizer id, not part of the model's function"),
      Ignored("decoder_start_token_id", "null", "encoder-decoder generation only"),
      Ignored("output_hidden_states", "false", kOutputs),
      Ignored("output_attentions", "false", kOutputs),
      Ignored("return_dict", "true", kOutputs),
      Ignored("torchscript", "false", "HF's tracing mode"),
      Ignored("id2label", "null", kHeads),
      Ignored("label2id", "null", kHeads),
      Ignored("num_labels", "2", kHeads),
      Ignored("problem_type", "null", kHeads),
      Ignored("finetuning_task", "null", kHeads),
      Ignored("chunk_size_feed_forward", "0",
              "HF's chunked feed-forward computes the same values (these models do not chunk)"),
      Ignored("is_decoder", "false", "read by encoder-decoder models only"),
      Ignored("tie_encoder_decoder", "false", "encoder-decoder models only"),
      Ignored("tokenizer_class", "null", "the tokenizer, not the model"),
      Ignored("task_specific_params", "null", "pipelines' generation settings"),
      Ignored("max_length", "20", kGeneration),
      Ignored("do_sample", "false", kGeneration),
      Ignored("temperature", "1.0", kGeneration),
      Ignored("top_k", "50", kGeneration),
      Ignored("top_p", "1.0", kGeneration),
      Ignored("num_beams", "1", kGeneration),
      Ignored("repetition_penalty", "1.0", kGeneration),
  };
}

}  // namespace conveyor
