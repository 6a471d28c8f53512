#include "tests/trainer/hf/llama_forward.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace conveyor::testing_util {
namespace {

// Qwen3RMSNorm over head `h` of every row: x / sqrt(mean(x^2) + eps) * w.
void HeadRmsNorm(Matrix* x, int64_t h, int64_t d, const HfTensor& w, double eps) {
  for (std::vector<double>& row : *x) {
    double* v = row.data() + h * d;
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += v[i] * v[i];
    const double scale = 1.0 / std::sqrt(sum / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) v[i] = v[i] * scale * double(w.data[i]);
  }
}

// apply_rotary_pos_emb with rotate_half on head `h` of every row (position = row).
void Rope(Matrix* x, int64_t h, int64_t d, double theta) {
  for (size_t p = 0; p < x->size(); ++p) {
    double* v = (*x)[p].data() + h * d;
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = double(p) / std::pow(theta, double(2 * i) / double(d));
      const double a = v[i], b = v[i + d / 2];
      v[i] = a * std::cos(angle) - b * std::sin(angle);
      v[i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
    }
  }
}

// The attention block's output (o_proj's) for the normalised input h of layer prefix `l`.
Matrix Attention(const LlamaSpec& m, const HfTensorMap& t, const std::string& l, const Matrix& h) {
  const int64_t d = m.head_dim;
  auto w = [&](const std::string& name) -> const HfTensor& { return t.at(l + name); };
  auto b = [&](const std::string& name) { return m.qkv_bias ? &t.at(l + name) : nullptr; };
  Matrix q = Linear(h, w("self_attn.q_proj.weight"), b("self_attn.q_proj.bias"));
  Matrix k = Linear(h, w("self_attn.k_proj.weight"), b("self_attn.k_proj.bias"));
  const Matrix v = Linear(h, w("self_attn.v_proj.weight"), b("self_attn.v_proj.bias"));
  if (m.qk_norm) {
    for (int64_t head = 0; head < m.heads; ++head) {
      HeadRmsNorm(&q, head, d, w("self_attn.q_norm.weight"), m.eps);
    }
    for (int64_t head = 0; head < m.kv_heads; ++head) {
      HeadRmsNorm(&k, head, d, w("self_attn.k_norm.weight"), m.eps);
    }
  }
  for (int64_t head = 0; head < m.heads; ++head) Rope(&q, head, d, m.rope_theta);
  for (int64_t head = 0; head < m.kv_heads; ++head) Rope(&k, head, d, m.rope_theta);
  return Linear(CausalAttention(q, k, v, m.heads, m.kv_heads, d), w("self_attn.o_proj.weight"));
}

}  // namespace

Matrix SwigluMlp(const Matrix& h, const HfTensor& gate_w, const HfTensor& up_w,
                 const HfTensor& down_w) {
  Matrix gate = Linear(h, gate_w);
  const Matrix up = Linear(h, up_w);
  for (size_t p = 0; p < gate.size(); ++p) {
    for (size_t i = 0; i < gate[p].size(); ++i) {
      gate[p][i] = gate[p][i] / (1 + std::exp(-gate[p][i])) * up[p][i];  // silu(gate) * up
    }
  }
  return Linear(gate, down_w);
}

void AddAttentionTensors(const LlamaSpec& spec, int64_t hidden, int64_t layer,
                         const AddTensorFn& add) {
  const int64_t q = spec.heads * spec.head_dim, kv = spec.kv_heads * spec.head_dim;
  const std::string l = absl::StrCat("model.layers.", layer, ".");
  add(l + "input_layernorm.weight", {hidden}, 1);
  add(l + "post_attention_layernorm.weight", {hidden}, 1);
  add(l + "self_attn.q_proj.weight", {q, hidden}, 0);
  add(l + "self_attn.k_proj.weight", {kv, hidden}, 0);
  add(l + "self_attn.v_proj.weight", {kv, hidden}, 0);
  if (spec.qkv_bias) {
    add(l + "self_attn.q_proj.bias", {q}, 0);
    add(l + "self_attn.k_proj.bias", {kv}, 0);
    add(l + "self_attn.v_proj.bias", {kv}, 0);
  }
  if (spec.qk_norm) {
    add(l + "self_attn.q_norm.weight", {spec.head_dim}, 1);
    add(l + "self_attn.k_norm.weight", {spec.head_dim}, 1);
  }
  add(l + "self_attn.o_proj.weight", {hidden, q}, 0);
}

Reference LlamaForward(const LlamaSpec& m, const HfTensorMap& t, const std::vector<int32_t>& tokens,
                       const std::vector<int32_t>& labels, const MlpFn& mlp,
                       const AttentionFn& attention, Matrix* last_hidden) {
  auto w = [&](const std::string& name) -> const HfTensor& { return t.at(name); };
  Matrix x = Rows(w("model.embed_tokens.weight"), tokens);
  for (int64_t layer = 0; layer < m.layers; ++layer) {
    const std::string l = absl::StrCat("model.layers.", layer, ".");
    const Matrix h = RmsNorm(x, w(l + "input_layernorm.weight"), m.eps);
    AddInto(attention ? attention(layer, h) : Attention(m, t, l, h), &x);
    AddInto(mlp(layer, RmsNorm(x, w(l + "post_attention_layernorm.weight"), m.eps)), &x);
  }
  if (last_hidden != nullptr) *last_hidden = x;
  return LogitsAndLoss(RmsNorm(x, w("model.norm.weight"), m.eps),
                       w(m.tied ? "model.embed_tokens.weight" : "lm_head.weight"), labels);
}

}  // namespace conveyor::testing_util
