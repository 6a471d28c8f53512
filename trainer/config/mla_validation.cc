#include "trainer/config/mla_validation.h"

#include "absl/strings/str_cat.h"
#include "proto/config_choices.h"

namespace conveyor {
namespace {

void Positive(const char* flag, int64_t v, std::vector<std::string>* out) {
  if (v > 0) return;
  out->push_back(absl::StrCat(
      flag, " ", v, " must be positive under --multi-latent-attention: set ", flag, " > 0"));
}

// The widths: every latent and head part present, the rotated part pairs whole.
void WidthProblems(const ModelConfig& m, std::vector<std::string>* out) {
  if (m.q_lora_rank() < 0) {
    out->push_back(absl::StrCat("--q-lora-rank ", m.q_lora_rank(),
                                " must not be negative: 0 projects the queries directly"));
  }
  Positive("--kv-lora-rank", m.kv_lora_rank(), out);
  Positive("--qk-head-dim", m.qk_head_dim(), out);
  Positive("--qk-pos-emb-head-dim", m.qk_pos_emb_head_dim(), out);
  Positive("--v-head-dim", m.v_head_dim(), out);
  if (m.qk_pos_emb_head_dim() > 0 && m.qk_pos_emb_head_dim() % 2 != 0) {
    out->push_back(absl::StrCat("--qk-pos-emb-head-dim ", m.qk_pos_emb_head_dim(),
                                " must be even: RoPE rotates pairs of dims"));
  }
}

// What multi-latent attention replaces or leaves out: learned positions (its keys' shared
// part is RoPE's), --rotary-percent (the rotated part is --qk-pos-emb-head-dim),
// --add-qkv-bias (its projections have no biases, as in Megatron), the GPU until its
// kernels have run on one (as context parallelism's). (Megatron's
// --recompute-modules mla_up_proj is refused with the other modules Conveyor lacks.)
void CombinationProblems(const Config& c, std::vector<std::string>* out) {
  const ModelConfig& m = c.model();
  const PositionEmbeddingType positions =
      ChoiceOr(m.position_embedding_type(), PositionEmbeddingType::kLearnedAbsolute);
  if (positions != PositionEmbeddingType::kRope && positions != PositionEmbeddingType::kYarn) {
    out->push_back(
        absl::StrCat("--multi-latent-attention needs --position-embedding-type rope or yarn (not ",
                     m.position_embedding_type(), "): its keys' shared part is rotated by RoPE"));
  }
  if (m.rotary_percent() != 1.0f) {
    out->push_back(absl::StrCat("--rotary-percent ", m.rotary_percent(),
                                " with --multi-latent-attention: the rotated part of each head "
                                "is --qk-pos-emb-head-dim; drop --rotary-percent"));
  }
  if (m.add_qkv_bias()) {
    out->push_back(
        "--add-qkv-bias with --multi-latent-attention: its projections have no biases (as in "
        "Megatron); drop --add-qkv-bias");
  }
  if (ParseChoice<DeviceKind>(c.parallel().device()) == DeviceKind::kCuda) {
    out->push_back(
        "--multi-latent-attention with --device cuda: its CUDA attention kernels (value heads "
        "of --v-head-dim beside query and key heads of --qk-head-dim + --qk-pos-emb-head-dim) "
        "are written and compiled but have never run on a GPU (cuda_attention_test checks "
        "them when one is there); run multi-latent attention with --device cpu");
  }
}

}  // namespace

std::vector<std::string> MlaProblems(const Config& config) {
  const ModelConfig& m = config.model();
  if (!m.multi_latent_attention()) return {};
  std::vector<std::string> out;
  WidthProblems(m, &out);
  CombinationProblems(config, &out);
  return out;
}

}  // namespace conveyor
