#include "trainer/hf/mla_config_json.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "trainer/hf/hf_config_fields.h"

namespace conveyor {
namespace {

// A field transformers derives from others but reads from the file when present: it must
// hold the derived value.
void CheckDerived(const Json& hf, const char* key, int64_t derived, const std::string& from,
                  ModelFlagsFromFile* flags) {
  const Json& given = MemberOrNull(hf, key);
  if (given.is_null() || AsInt64(given) == derived) return;
  flags->Unsupported(absl::StrCat(key, " = ", AsInt64(given), " is not ", from, " = ", derived,
                                  ": DeepseekV3 sizes its projections and RoPE by it"));
}

// DeepseekV3Attention multiplies its softmax scale by m(s, mscale_all_dim)^2 whenever YaRN's
// mscale_all_dim is nonzero, while its RoPE takes m(s, mscale) / m(s, mscale_all_dim) as the
// concentration factor only when mscale is nonzero too; Conveyor's --mscale-all-dim does
// both (positions_config_json.h reads the pair only together), so one without the other is
// not Conveyor's model.
void CheckYarnMscales(const Json& hf, ModelFlagsFromFile* flags) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const Json& scaling = MemberOrNull(hf, key);
    if (!scaling.is_object()) continue;
    const Json& all_dim = MemberOrNull(scaling, "mscale_all_dim");
    const Json& mscale = MemberOrNull(scaling, "mscale");
    const bool has_all_dim = all_dim.is_number() && AsDouble(all_dim) != 0.0;
    const bool has_mscale = mscale.is_number() && AsDouble(mscale) != 0.0;
    if (has_all_dim && !has_mscale) {
      flags->Unsupported(absl::StrCat(
          key, ".mscale_all_dim = ", JsonValueText(all_dim),
          " without mscale: DeepseekV3 then scales its softmax by m(s, mscale_all_dim)^2 but "
          "rotates with YaRN's default concentration factor; give mscale too"));
    }
  }
}

}  // namespace

void ApplyMlaConfigJson(const Json& hf, const HfArchitecture& arch, ModelFlagsFromFile* flags) {
  if (!arch.mla) return;
  auto value = [&](const char* key) { return HfFieldOrDefault(hf, arch, key); };
  const std::string architecture = absl::StrCat("architectures = [\"", arch.class_name, "\"]");
  flags->Bool("multi_latent_attention", architecture, true, "multi-latent attention");
  flags->Bool("qk_layernorm", architecture, true, "RMSNorms on the latents");
  const Json q_lora = value("q_lora_rank");
  flags->Int("q_lora_rank", "q_lora_rank", q_lora.is_null() ? 0 : AsInt64(q_lora));
  flags->Int("kv_lora_rank", "kv_lora_rank", AsInt64(value("kv_lora_rank")));
  const int64_t nope = AsInt64(value("qk_nope_head_dim"));
  const int64_t rope = AsInt64(value("qk_rope_head_dim"));
  flags->Int("qk_head_dim", "qk_nope_head_dim", nope);
  flags->Int("qk_pos_emb_head_dim", "qk_rope_head_dim", rope);
  flags->Int("v_head_dim", "v_head_dim", AsInt64(value("v_head_dim")));
  CheckDerived(hf, "head_dim", rope, "qk_rope_head_dim", flags);
  CheckDerived(hf, "qk_head_dim", nope + rope, "qk_nope_head_dim + qk_rope_head_dim", flags);
  CheckYarnMscales(hf, flags);
  // The multi-token prediction depths stored after the layers (transformers skips them).
  flags->Int("mtp_num_layers", "num_nextn_predict_layers",
             AsInt64(value("num_nextn_predict_layers")));
  // DeepseekV3Attention repeats its key and value heads num_attention_heads /
  // num_key_value_heads times (repeat_kv), though every head already has its own.
  const Json& kv_heads = MemberOrNull(hf, "num_key_value_heads");
  const int64_t heads = AsInt64(MemberOrNull(hf, "num_attention_heads"));
  if (!kv_heads.is_null() && AsInt64(kv_heads) != heads) {
    flags->Unsupported(absl::StrCat("num_key_value_heads = ", AsInt64(kv_heads),
                                    " is not num_attention_heads = ", heads,
                                    ": multi-latent attention has a key and value per head"));
  }
}

bool HfRopeInterleave(const Json& hf, const HfArchitecture& arch) {
  return arch.mla && AsBool(HfFieldOrDefault(hf, arch, "rope_interleave"));
}

void AddMlaConfigJsonFields(const ModelConfig& m, const HfArchitecture& arch,
                            std::map<std::string, std::string>* fields) {
  if (!arch.mla) return;
  auto& f = *fields;
  f["q_lora_rank"] = m.q_lora_rank() > 0 ? absl::StrCat(m.q_lora_rank()) : "null";
  f["kv_lora_rank"] = absl::StrCat(m.kv_lora_rank());
  f["qk_nope_head_dim"] = absl::StrCat(m.qk_head_dim());
  f["qk_rope_head_dim"] = absl::StrCat(m.qk_pos_emb_head_dim());
  f["qk_head_dim"] = absl::StrCat(m.qk_head_dim() + m.qk_pos_emb_head_dim());
  f["head_dim"] = absl::StrCat(m.qk_pos_emb_head_dim());
  f["v_head_dim"] = absl::StrCat(m.v_head_dim());
  f["num_key_value_heads"] = absl::StrCat(m.num_attention_heads());
  f["rope_interleave"] = "true";  // the export permutes the rotated rows (mla_mapping.h)
  f["attention_bias"] = "false";
  f["pretraining_tp"] = "1";
  f["num_nextn_predict_layers"] = absl::StrCat(m.mtp_num_layers());
}

}  // namespace conveyor
