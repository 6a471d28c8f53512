// DeepseekV3ForCausalLM folders against an independent implementation: the test writes
// tiny random models in Hugging Face's layout and computes HF's forward pass in double
// precision straight from the HF tensors, from modeling_deepseek_v3.py:
//   attention (DeepseekV3Attention): q = q_b_proj(RMSNorm(q_a_proj h)) (or q_proj h) split
//     per head into [q_nope | q_pe]; [c_kv | k_pe] = kv_a_proj_with_mqa h;
//     [k_nope | v]_head = kv_b_proj(RMSNorm(c_kv)); q_pe and k_pe (one for all heads)
//     rotated by apply_rotary_pos_emb_interleave when rope_interleave (the pairs (2j, 2j+1)
//     gathered into halves, then rotate_half) else apply_rotary_pos_emb; causal softmax of
//     (q_nope.k_nope + q_pe.k_pe) / sqrt(qk_nope_head_dim + qk_rope_head_dim) (times
//     m(s, mscale_all_dim)^2 under YaRN, whose frequencies and attention factor are written
//     out here too); o_proj over the heads' values;
//   MoE (DeepseekV3MoE, layers from first_k_dense_replace on): s = sigmoid(h G^T), the
//     choice s + e_score_correction_bias, each of n_group groups scored by the sum of its
//     two best choices, the topk_group best groups kept (the others' choices set to 0), the
//     top k of those chosen, weights s of the chosen / (their sum + 1e-20) when
//     norm_topk_prob, times routed_scaling_factor; plus the shared experts' SwiGLU MLP.
//   a multi-token prediction depth (model.layers.{num_hidden_layers}, which transformers
//     skips) as MtpDepthLoss writes it.
// Conveyor imports the folder as --load-hf does and its loss (with a depth, the loss plus
// the depth's) and logits must match within 1e-5 relative; an export gives back the HF tensors bit
// for bit and a config.json that configures the same model; tensor- and expert-parallel ranks read
// exactly their elements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_shape.h"
#include "parallel/self_communicator.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/trainer/hf/llama_checkpoint.h"
#include "tests/trainer/hf/llama_forward.h"
#include "tests/trainer/hf/slice_reads.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/export.h"
#include "trainer/hf/hf_folder.h"
#include "trainer/hf/llama_mapping.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using testing_util::FreshDir;
using testing_util::LoadHfConfig;
using testing_util::Matrix;
using testing_util::Reference;
using testing_util::WriteHfFolder;

constexpr int64_t kSeq = 8;
constexpr double kEps = 1e-6;

struct TinyDeepseek {
  std::string name;
  int64_t layers = 3, dense_layers = 1, hidden = 16, heads = 4, vocab = 50, dense_ffn = 20;
  int64_t q_lora = 12;  // 0: null (q_proj)
  int64_t kv_lora = 8, nope = 6, rope = 4, v = 5;
  int64_t experts = 8, topk = 4, groups = 4, topk_groups = 2, expert_ffn = 6, shared = 1;
  int64_t group_score = 2;  // the best choices that score a group (DeepseekV3TopkRouter's 2)
  double scaling = 2.5;
  bool interleave = true;
  bool tied = false;
  int64_t mtp = 0;  // multi-token prediction depths (model.layers.{layers + k})
  double yarn = 0;  // YaRN's factor over 16 original positions (mscale 1, mscale_all_dim
                    // 0.8); 0: plain RoPE
  bool limited() const { return groups > 1 && topk_groups < groups; }
};

void PrintTo(const TinyDeepseek& m, std::ostream* os) { *os << m.name; }

std::vector<TinyDeepseek> Models() {
  TinyDeepseek v3{"query_latent_grouped_interleaved"};
  TinyDeepseek plain{"no_query_latent_halves_tied"};
  plain.q_lora = 0;
  plain.interleave = false;
  plain.tied = true;
  plain.groups = 1;
  plain.topk_groups = 1;
  plain.topk = 2;
  plain.shared = 2;
  plain.scaling = 1.0;
  plain.dense_layers = 0;
  plain.layers = 2;
  TinyDeepseek yarn = v3;
  yarn.name = "yarn_mscale";
  yarn.yarn = 4;
  yarn.rope = 6;
  TinyDeepseek mtp = v3;
  mtp.name = "mtp_depth";
  mtp.mtp = 1;
  // num_experts_per_tok / topk_group = 1, where Megatron would score a group by its best
  // expert: transformers scores it by its best 2 (--moe-router-group-score-topk 2).
  TinyDeepseek scored_by_two = v3;
  scored_by_two.name = "groups_scored_by_two_not_one";
  scored_by_two.experts = 16;
  scored_by_two.groups = 8;
  scored_by_two.topk_groups = 4;
  return {v3, plain, yarn, mtp, scored_by_two};
}

std::string ConfigJson(const TinyDeepseek& m) {
  return absl::StrCat(
      "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"deepseek_v3\"",
      ", \"num_hidden_layers\": ", m.layers, ", \"hidden_size\": ", m.hidden,
      ", \"intermediate_size\": ", m.dense_ffn, ", \"num_attention_heads\": ", m.heads,
      ", \"num_key_value_heads\": ", m.heads, ", \"vocab_size\": ", m.vocab,
      ", \"max_position_embeddings\": 64, \"rope_theta\": 10000.0, \"rms_norm_eps\": 1e-06",
      ", \"hidden_act\": \"silu\", \"tie_word_embeddings\": ", m.tied ? "true" : "false",
      ", \"q_lora_rank\": ", m.q_lora > 0 ? absl::StrCat(m.q_lora) : "null",
      ", \"kv_lora_rank\": ", m.kv_lora, ", \"qk_nope_head_dim\": ", m.nope,
      ", \"qk_rope_head_dim\": ", m.rope, ", \"v_head_dim\": ", m.v, ", \"head_dim\": ", m.rope,
      ", \"rope_interleave\": ", m.interleave ? "true" : "false",
      ", \"n_routed_experts\": ", m.experts, ", \"num_experts_per_tok\": ", m.topk,
      ", \"moe_intermediate_size\": ", m.expert_ffn, ", \"n_shared_experts\": ", m.shared,
      ", \"n_group\": ", m.groups, ", \"topk_group\": ", m.topk_groups,
      ", \"routed_scaling_factor\": ", absl::StrFormat("%.1f", m.scaling),
      ", \"norm_topk_prob\": true", ", \"first_k_dense_replace\": ", m.dense_layers,
      ", \"scoring_func\": \"sigmoid\", \"topk_method\": \"noaux_tc\", \"attention_bias\": false",
      ", \"num_nextn_predict_layers\": ", m.mtp, ", \"aux_loss_alpha\": 0.001, \"seq_aux\": true",
      m.yarn == 0 ? ""
                  : absl::StrCat(", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": ", m.yarn,
                                 ", \"original_max_position_embeddings\": 16, \"mscale\": 1.0"
                                 ", \"mscale_all_dim\": 0.8, \"beta_fast\": 32, \"beta_slow\": 1}"),
      "}");
}

std::string Layer(int64_t layer) { return absl::StrCat("model.layers.", layer, "."); }

// Random HF weights: norm gains around 1, the expert bias in [0, 0.2) (so that every
// kept group's choices stay above the 0 that HF writes into the others), others
// ~ N(0, 0.3).
HfTensorMap RandomWeights(const TinyDeepseek& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::uniform_real_distribution<float> uniform(0.0f, 0.2f);
  HfTensorMap t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean) {
    HfTensor& tensor = t[name];
    tensor.shape = shape;
    tensor.data.resize(NumElements(shape));
    for (float& x : tensor.data) x = mean + normal(rng);
  };
  add("model.embed_tokens.weight", {m.vocab, m.hidden}, 0);
  add("model.norm.weight", {m.hidden}, 1);
  if (!m.tied) add("lm_head.weight", {m.vocab, m.hidden}, 0);
  const int64_t dq = m.nope + m.rope;
  for (int64_t i = 0; i < m.layers + m.mtp; ++i) {
    const std::string l = Layer(i), a = l + "self_attn.";
    if (i >= m.layers) {  // a multi-token prediction depth, its layer like the last
      add(l + "enorm.weight", {m.hidden}, 1);
      add(l + "hnorm.weight", {m.hidden}, 1);
      add(l + "eh_proj.weight", {m.hidden, 2 * m.hidden}, 0);
      add(l + "shared_head.norm.weight", {m.hidden}, 1);
      t[l + "embed_tokens.weight"] = t.at("model.embed_tokens.weight");
      t[l + "shared_head.head.weight"] =
          t.at(m.tied ? "model.embed_tokens.weight" : "lm_head.weight");
    }
    add(l + "input_layernorm.weight", {m.hidden}, 1);
    add(l + "post_attention_layernorm.weight", {m.hidden}, 1);
    if (m.q_lora > 0) {
      add(a + "q_a_proj.weight", {m.q_lora, m.hidden}, 0);
      add(a + "q_a_layernorm.weight", {m.q_lora}, 1);
      add(a + "q_b_proj.weight", {m.heads * dq, m.q_lora}, 0);
    } else {
      add(a + "q_proj.weight", {m.heads * dq, m.hidden}, 0);
    }
    add(a + "kv_a_proj_with_mqa.weight", {m.kv_lora + m.rope, m.hidden}, 0);
    add(a + "kv_a_layernorm.weight", {m.kv_lora}, 1);
    add(a + "kv_b_proj.weight", {m.heads * (m.nope + m.v), m.kv_lora}, 0);
    add(a + "o_proj.weight", {m.hidden, m.heads * m.v}, 0);
    const std::string p = l + "mlp.";
    if (i < m.dense_layers) {
      add(p + "gate_proj.weight", {m.dense_ffn, m.hidden}, 0);
      add(p + "up_proj.weight", {m.dense_ffn, m.hidden}, 0);
      add(p + "down_proj.weight", {m.hidden, m.dense_ffn}, 0);
      continue;
    }
    add(p + "gate.weight", {m.experts, m.hidden}, 0);
    HfTensor& bias = t[p + "gate.e_score_correction_bias"];
    bias.shape = {m.experts};
    for (int64_t e = 0; e < m.experts; ++e) bias.data.push_back(uniform(rng));
    for (int64_t e = 0; e < m.experts; ++e) {
      const std::string x = absl::StrCat(p, "experts.", e, ".");
      add(x + "gate_proj.weight", {m.expert_ffn, m.hidden}, 0);
      add(x + "up_proj.weight", {m.expert_ffn, m.hidden}, 0);
      add(x + "down_proj.weight", {m.hidden, m.expert_ffn}, 0);
    }
    const int64_t shared = m.shared * m.expert_ffn;
    add(p + "shared_experts.gate_proj.weight", {shared, m.hidden}, 0);
    add(p + "shared_experts.up_proj.weight", {shared, m.hidden}, 0);
    add(p + "shared_experts.down_proj.weight", {m.hidden, shared}, 0);
  }
  return t;
}

// ---- The reference, from the HF tensors. ----

// yarn_get_mscale: m(s, x) = 0.1 x ln s + 1 for s > 1.
double Mscale(double s, double x) { return s <= 1 ? 1.0 : 0.1 * x * std::log(s) + 1.0; }

// RoPE's inverse frequencies over d rotated dims: theta^(-2j/d), or with YaRN
// (_compute_yarn_parameters) the interpolated theta^(-2j/d) / s blended into them over
// the correction range [floor(low), ceil(high)] of dims (beta_fast 32, beta_slow 1, 16
// original positions) by a linear ramp.
std::vector<double> InverseFrequencies(const TinyDeepseek& m) {
  const int64_t d = m.rope;
  const double base = 10000.0, original = 16.0;
  auto correction_dim = [&](double rotations) {
    return d * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(std::floor(correction_dim(32)), 0.0);
  double high = std::min(std::ceil(correction_dim(1)), double(d - 1));
  if (low == high) high += 0.001;
  std::vector<double> inv(d / 2);
  for (int64_t j = 0; j < d / 2; ++j) {
    const double extrapolated = std::pow(base, -double(2 * j) / double(d));
    if (m.yarn == 0) {
      inv[j] = extrapolated;
      continue;
    }
    const double ramp = std::clamp((double(j) - low) / (high - low), 0.0, 1.0);
    inv[j] = extrapolated / m.yarn * ramp + extrapolated * (1 - ramp);
  }
  return inv;
}

// RoPE on x[0, d) at `position` as DeepseekV3 applies it: with rope_interleave the
// channels (2j, 2j+1) are first gathered into (j, d/2 + j); then rotate_half, cos and sin
// times YaRN's attention factor m(s, mscale) / m(s, mscale_all_dim).
void RotateRopePart(const TinyDeepseek& m, int64_t position, double* x) {
  const int64_t d = m.rope;
  const std::vector<double> inv = InverseFrequencies(m);
  const double factor = m.yarn == 0 ? 1.0 : Mscale(m.yarn, 1.0) / Mscale(m.yarn, 0.8);
  std::vector<double> y(x, x + d);
  if (m.interleave) {
    for (int64_t j = 0; j < d / 2; ++j) y[j] = x[2 * j], y[d / 2 + j] = x[2 * j + 1];
  }
  for (int64_t j = 0; j < d / 2; ++j) {
    const double c = factor * std::cos(position * inv[j]), s = factor * std::sin(position * inv[j]);
    x[j] = y[j] * c - y[d / 2 + j] * s;
    x[d / 2 + j] = y[d / 2 + j] * c + y[j] * s;
  }
}

Matrix Columns(const Matrix& x, int64_t begin, int64_t count) {
  Matrix out;
  for (const auto& row : x) out.emplace_back(row.begin() + begin, row.begin() + begin + count);
  return out;
}

Matrix MlaAttention(const TinyDeepseek& m, const HfTensorMap& t, int64_t layer, const Matrix& h) {
  const std::string a = Layer(layer) + "self_attn.";
  auto w = [&](const std::string& name) -> const HfTensor& { return t.at(a + name); };
  const Matrix q = m.q_lora > 0
                       ? testing_util::Linear(
                             testing_util::RmsNorm(testing_util::Linear(h, w("q_a_proj.weight")),
                                                   w("q_a_layernorm.weight"), kEps),
                             w("q_b_proj.weight"))
                       : testing_util::Linear(h, w("q_proj.weight"));
  const Matrix kv_a = testing_util::Linear(h, w("kv_a_proj_with_mqa.weight"));
  const Matrix kv = testing_util::Linear(
      testing_util::RmsNorm(Columns(kv_a, 0, m.kv_lora), w("kv_a_layernorm.weight"), kEps),
      w("kv_b_proj.weight"));
  const int64_t dq = m.nope + m.rope, dkv = m.nope + m.v, seq = int64_t(h.size());
  // DeepseekV3Attention's scaling: qk_head_dim^-1/2, times m(s, mscale_all_dim)^2 under YaRN.
  const double mscale = m.yarn == 0 ? 1.0 : Mscale(m.yarn, 0.8);
  const double scale = mscale * mscale / std::sqrt(double(dq));
  Matrix context(seq, std::vector<double>(m.heads * m.v, 0.0));
  for (int64_t head = 0; head < m.heads; ++head) {
    // Per position: the query [q_nope | rotated q_pe] and key [k_nope | rotated k_pe].
    Matrix qs(seq), ks(seq);
    for (int64_t p = 0; p < seq; ++p) {
      qs[p].assign(q[p].begin() + head * dq, q[p].begin() + (head + 1) * dq);
      ks[p].assign(kv[p].begin() + head * dkv, kv[p].begin() + head * dkv + m.nope);
      ks[p].insert(ks[p].end(), kv_a[p].begin() + m.kv_lora, kv_a[p].end());
      RotateRopePart(m, p, qs[p].data() + m.nope);
      RotateRopePart(m, p, ks[p].data() + m.nope);
    }
    for (int64_t p = 0; p < seq; ++p) {
      std::vector<double> score(p + 1);
      for (int64_t k = 0; k <= p; ++k) {
        score[k] = scale * std::inner_product(qs[p].begin(), qs[p].end(), ks[k].begin(), 0.0);
      }
      const double top = *std::max_element(score.begin(), score.end());
      double sum = 0;
      for (double& s : score) sum += s = std::exp(s - top);
      for (int64_t k = 0; k <= p; ++k) {
        for (int64_t i = 0; i < m.v; ++i) {
          context[p][head * m.v + i] += score[k] / sum * kv[k][head * dkv + m.nope + i];
        }
      }
    }
  }
  return testing_util::Linear(context, w("o_proj.weight"));
}

// The indices of the k largest of `values` (ties to the lower index).
std::vector<int64_t> Largest(const std::vector<double>& values, int64_t k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return values[a] > values[b]; });
  order.resize(k);
  return order;
}

Matrix DeepseekMoe(const TinyDeepseek& m, const HfTensorMap& t, int64_t layer, const Matrix& h) {
  const std::string p = Layer(layer) + "mlp.";
  const Matrix logits = testing_util::Linear(h, t.at(p + "gate.weight"));
  const HfTensor& bias = t.at(p + "gate.e_score_correction_bias");
  std::vector<Matrix> outputs;
  for (int64_t e = 0; e < m.experts; ++e) {
    const std::string x = absl::StrCat(p, "experts.", e, ".");
    outputs.push_back(testing_util::SwigluMlp(
        h, t.at(x + "gate_proj.weight"), t.at(x + "up_proj.weight"), t.at(x + "down_proj.weight")));
  }
  Matrix y = testing_util::SwigluMlp(h, t.at(p + "shared_experts.gate_proj.weight"),
                                     t.at(p + "shared_experts.up_proj.weight"),
                                     t.at(p + "shared_experts.down_proj.weight"));
  const int64_t size = m.experts / m.groups;
  for (size_t r = 0; r < h.size(); ++r) {
    std::vector<double> s(m.experts), choice(m.experts);
    for (int64_t e = 0; e < m.experts; ++e) {
      s[e] = 1.0 / (1.0 + std::exp(-logits[r][e]));
      choice[e] = s[e] + double(bias.data[e]);
    }
    std::vector<double> group_score(m.groups);
    for (int64_t g = 0; g < m.groups; ++g) {
      const std::vector<double> members(choice.begin() + g * size, choice.begin() + (g + 1) * size);
      for (int64_t i : Largest(members, m.group_score)) group_score[g] += members[i];
    }
    std::vector<bool> kept(m.groups, false);
    for (int64_t g : Largest(group_score, m.topk_groups)) kept[g] = true;
    for (int64_t e = 0; e < m.experts; ++e) choice[e] = kept[e / size] ? choice[e] : 0.0;
    const std::vector<int64_t> picks = Largest(choice, m.topk);
    double sum = 0;
    for (int64_t e : picks) sum += s[e];
    for (int64_t e : picks) {
      const double weight = s[e] / (sum + 1e-20) * m.scaling;
      for (int64_t i = 0; i < m.hidden; ++i) y[r][i] += weight * outputs[e][r][i];
    }
  }
  return y;
}

// Layer `layer`'s MLP: dense before first_k_dense_replace, else DeepseekV3MoE.
Matrix Mlp(const TinyDeepseek& m, const HfTensorMap& t, int64_t layer, const Matrix& h) {
  if (layer >= m.dense_layers) return DeepseekMoe(m, t, layer, h);
  const std::string l = Layer(layer) + "mlp.";
  return testing_util::SwigluMlp(h, t.at(l + "gate_proj.weight"), t.at(l + "up_proj.weight"),
                                 t.at(l + "down_proj.weight"));
}

// Multi-token prediction depth 1 (DeepSeek-V3 report §2.2, as DeepSeek's checkpoints store it
// and Megatron computes it): at position i < seq - 1,
//   x = eh_proj [enorm(Emb(t_{i+1})) ; hnorm(h_i)],  h the main model's output after its
//       final norm (what DeepSeek's inference code and Megatron pass on),
//   x through layer num_hidden_layers (attention and MLP like the others'),
//   logits = shared_head.norm(x) lm_head^T against label_{i+1};
// its mean cross-entropy over those seq - 1 positions.
double MtpDepthLoss(const TinyDeepseek& m, const HfTensorMap& t, const std::vector<int32_t>& tokens,
                    const std::vector<int32_t>& labels, const Matrix& hidden) {
  const std::string l = Layer(m.layers);
  const std::vector<int32_t> next(tokens.begin() + 1, tokens.end());
  const Matrix e = testing_util::RmsNorm(
      testing_util::Rows(t.at("model.embed_tokens.weight"), next), t.at(l + "enorm.weight"), kEps);
  const Matrix normed = testing_util::RmsNorm(hidden, t.at("model.norm.weight"), kEps);
  const Matrix h = testing_util::RmsNorm(Matrix(normed.begin(), normed.end() - 1),
                                         t.at(l + "hnorm.weight"), kEps);
  Matrix cat = e;
  for (size_t p = 0; p < cat.size(); ++p) cat[p].insert(cat[p].end(), h[p].begin(), h[p].end());
  Matrix x = testing_util::Linear(cat, t.at(l + "eh_proj.weight"));
  testing_util::AddInto(
      MlaAttention(m, t, m.layers,
                   testing_util::RmsNorm(x, t.at(l + "input_layernorm.weight"), kEps)),
      &x);
  testing_util::AddInto(
      Mlp(m, t, m.layers,
          testing_util::RmsNorm(x, t.at(l + "post_attention_layernorm.weight"), kEps)),
      &x);
  const std::vector<int32_t> later(labels.begin() + 1, labels.end());
  return testing_util::LogitsAndLoss(
             testing_util::RmsNorm(x, t.at(l + "shared_head.norm.weight"), kEps),
             t.at(m.tied ? "model.embed_tokens.weight" : "lm_head.weight"), later)
      .loss;
}

// HF's logits and loss, and the objective Conveyor trains: the loss plus, with a
// multi-token prediction depth, its loss (--mtp-loss-scaling-factor 1, one depth).
struct HfOutputs {
  Reference main;
  double objective = 0;
};

HfOutputs HfForward(const TinyDeepseek& m, const HfTensorMap& t, const std::vector<int32_t>& tokens,
                    const std::vector<int32_t>& labels) {
  testing_util::LlamaSpec spec;
  spec.layers = m.layers;
  spec.eps = kEps;
  spec.tied = m.tied;
  Matrix hidden;
  HfOutputs out;
  out.main = testing_util::LlamaForward(
      spec, t, tokens, labels, [&](int64_t layer, const Matrix& h) { return Mlp(m, t, layer, h); },
      [&](int64_t layer, const Matrix& h) { return MlaAttention(m, t, layer, h); }, &hidden);
  out.objective = out.main.loss;
  if (m.mtp > 0) out.objective += MtpDepthLoss(m, t, tokens, labels, hidden);
  return out;
}

// ---- Conveyor's side. ----

// The configuration --load-hf gives (a multi-token prediction depth's loss weighing 1).
absl::StatusOr<ResolvedConfig> ConfigFor(const std::string& dir) {
  return LoadHfConfig(dir, kSeq, {"--mtp-loss-scaling-factor", "1"});
}

class DeepseekReferenceTest : public ::testing::TestWithParam<TinyDeepseek> {};

TEST_P(DeepseekReferenceTest, ConfigJsonSetsTheFlags) {
  const TinyDeepseek m = GetParam();
  const std::string dir = WriteHfFolder(ConfigJson(m), RandomWeights(m, 3), m.name + "_flags");
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& model = config->config().model();
  EXPECT_TRUE(model.multi_latent_attention());
  EXPECT_TRUE(model.qk_layernorm());
  EXPECT_EQ(model.q_lora_rank(), m.q_lora);
  EXPECT_EQ(model.kv_lora_rank(), m.kv_lora);
  EXPECT_EQ(model.qk_head_dim(), m.nope);
  EXPECT_EQ(model.qk_pos_emb_head_dim(), m.rope);
  EXPECT_EQ(model.v_head_dim(), m.v);
  EXPECT_EQ(model.num_experts(), m.experts);
  EXPECT_EQ(model.moe_router_topk(), m.topk);
  EXPECT_EQ(model.moe_router_score_function(), "sigmoid");
  EXPECT_TRUE(model.moe_router_enable_expert_bias());
  EXPECT_EQ(model.moe_router_topk_scaling_factor(), float(m.scaling));
  EXPECT_EQ(model.moe_router_num_groups(), m.limited() ? m.groups : 0);
  EXPECT_EQ(model.moe_router_group_topk(), m.limited() ? m.topk_groups : 0);
  EXPECT_EQ(model.moe_router_group_score_topk(), m.limited() ? 2 : 0);
  EXPECT_EQ(model.moe_shared_expert_intermediate_size(), m.shared * m.expert_ffn);
  EXPECT_EQ(model.moe_layer_freq(), m.dense_layers > 0 ? "[0,1,1]" : "1");
  EXPECT_EQ(model.position_embedding_type(), m.yarn == 0 ? "rope" : "yarn");
  EXPECT_EQ(model.mtp_num_layers(), m.mtp);
  if (m.yarn != 0) {
    EXPECT_EQ(model.mscale_all_dim(), 0.8f);
  }
}

// Conveyor's model with the imported parameters and expert biases.
void LoadInto(const GlobalTensorMap& imported, GptModel* model) {
  testing_util::CopyImportedParameters(imported, model);
  for (TransformerLayer* layer : model->AllLayers()) {
    if (layer->moe() == nullptr) continue;
    ExpertBias* bias = layer->moe()->expert_bias();
    ASSERT_NE(bias, nullptr);
    const std::vector<float>& value = imported.at(bias->name());
    std::copy(value.begin(), value.end(), bias->mutable_values());
  }
}

TEST_P(DeepseekReferenceTest, FirstStepLossAndLogitsMatchTheReference) {
  const TinyDeepseek m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 17);
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, m.name);
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ModelShape& shape = config->model_shape();
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/1, &one_rank);
  LoadInto(*imported, &model);
  const auto [tokens, labels] = testing_util::FixedTokensAndLabels(kSeq, m.vocab);
  const MicroBatchContext mb{1, 0, 1, kSeq, /*training=*/false};
  GptStash stash;
  const absl::StatusOr<float> loss = model.Forward(mb, tokens.data(), labels.data(), &stash);
  ASSERT_TRUE(loss.ok()) << loss.status();

  const HfOutputs hf = HfForward(m, weights, tokens, labels);
  const Reference& ref = hf.main;
  EXPECT_NEAR(*loss, hf.objective, 1e-5 * hf.objective);
  if (m.limited() && m.topk / m.topk_groups != m.group_score) {
    // Megatron's scoring routes some token elsewhere here: the variant tells them apart.
    TinyDeepseek megatron = m;
    megatron.group_score = m.topk / m.topk_groups;
    EXPECT_GT(std::fabs(HfForward(megatron, weights, tokens, labels).objective - hf.objective),
              1e-3 * hf.objective);
  }
  const double worst = testing_util::WorstRelativeLogitError(
      ref.logits, stash.head.output.logits.data(), shape.padded_vocab);
  EXPECT_LT(worst, 1e-5) << "largest relative logit error";
  RecordProperty("relative_loss_error",
                 absl::StrCat(std::fabs(*loss - hf.objective) / hf.objective));
  RecordProperty("reference_loss", absl::StrFormat("%.17g", ref.loss));
}

TEST_P(DeepseekReferenceTest, ExportThenImportIsBitExact) {
  const TinyDeepseek m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 23);
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, m.name + "_in");
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string save = testing_util::SaveAsCheckpoint(*config, &*imported, m.name + "_ckpt");

  HfExportSummary summary;
  const std::string out = FreshDir(m.name + "_out");
  const absl::Status exported_ok = ExportHf(save, std::nullopt, out, HfExportOptions(), &summary);
  ASSERT_TRUE(exported_ok.ok()) << exported_ok;
  EXPECT_EQ(summary.architecture, "DeepseekV3ForCausalLM");
  const absl::StatusOr<HfTensorMap> exported =
      ReadHfWeights(out, [](const std::string&) { return false; });
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->size(), weights.size());
  // The export writes rope_interleave true: a folder in halves comes back interleaved.
  const TinyDeepseek as_exported = [&] {
    TinyDeepseek e = m;
    e.interleave = true;
    return e;
  }();
  const double from_folder = HfForward(m, weights, {1, 2, 3, 4}, {2, 3, 4, 5}).objective;
  const double from_export =
      HfForward(as_exported, *exported, {1, 2, 3, 4}, {2, 3, 4, 5}).objective;
  EXPECT_NEAR(from_export, from_folder, 1e-12 * from_folder);
  for (const auto& [name, tensor] : weights) {
    ASSERT_EQ(exported->count(name), 1) << name;
    EXPECT_EQ(exported->at(name).shape, tensor.shape) << name;
    if (m.interleave) {
      EXPECT_TRUE(exported->at(name).data == tensor.data) << name << " differs";
    }
  }
  const absl::StatusOr<ResolvedConfig> again = ConfigFor(out);
  ASSERT_TRUE(again.ok()) << again.status();
  const absl::StatusOr<GlobalTensorMap> reimported = ReadHf(out, again->config());
  ASSERT_TRUE(reimported.ok()) << reimported.status();
  EXPECT_TRUE(*reimported == *imported);
}

// Each rank reads exactly the elements its parameters keep: TP 2 (heads of the
// up-projections, the down-projections whole), EP 2 and TP 2 with ETP 1 and EP 2.
TEST_P(DeepseekReferenceTest, LayoutsReadOnlyTheirElements) {
  const TinyDeepseek m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 31);
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, m.name + "_slices");
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> whole = ReadHf(dir, config->config());
  ASSERT_TRUE(whole.ok()) << whole.status();
  const int64_t file_bytes = testing_util::F32DataBytes(weights);
  testing_util::ExpectExpertLayoutReadsMatchWholeRead(dir, *config, *whole, file_bytes);
}

// transformers 5 writes num_nextn_predict_layers 1 without saving the depth: such a folder
// is imported without multi-token prediction, as transformers loads it.
TEST(DeepseekConfigTest, DepthsAbsentFromTheWeightsAreNotImported) {
  const TinyDeepseek m = Models()[0];
  std::string json = ConfigJson(m);
  const std::string none = "\"num_nextn_predict_layers\": 0";
  json.replace(json.find(none), none.size(), "\"num_nextn_predict_layers\": 1");
  const std::string dir = WriteHfFolder(json, RandomWeights(m, 5), "depth_absent");
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->config().model().mtp_num_layers(), 0);
  EXPECT_TRUE(ReadHf(dir, config->config()).ok());
}

// A depth's copy of the embedding or the output layer that is not the original bit for bit
// would change the math if the import dropped it: the whole read and each
// tensor-parallel rank's slice read refuse it, naming the copy, its file and the original.
TEST(DeepseekConfigTest, AnMtpCopyThatDiffersFromItsOriginalIsRefusedByName) {
  const TinyDeepseek m = Models()[3];
  ASSERT_EQ(m.mtp, 1);
  const std::string depth = Layer(m.layers);
  const std::vector<std::pair<std::string, std::string>> copies = {
      {depth + "embed_tokens.weight", "model.embed_tokens.weight"},
      {depth + "shared_head.head.weight", "lm_head.weight"}};
  for (const auto& [copy, original] : copies) {
    HfTensorMap weights = RandomWeights(m, 41);
    weights[copy].data.back() += 1e-3f;  // in the last row
    const std::string dir = WriteHfFolder(ConfigJson(m), weights, "differs_" + copy);
    const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
    ASSERT_TRUE(config.ok()) << config.status();
    const absl::StatusOr<GlobalTensorMap> whole = ReadHf(dir, config->config());
    ASSERT_FALSE(whole.ok()) << copy;
    EXPECT_EQ(whole.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part :
         {copy, original, std::string("model.safetensors"), std::string(" differs from "),
          absl::StrCat("write ", original, " into ", copy)}) {
      EXPECT_THAT(std::string(whole.status().message()), HasSubstr(part)) << copy;
    }
    // Slice reads of the Conveyor tensor the original becomes: the first half of its rows
    // reads the copy's first half (equal), the second half the changed last row.
    const std::string conveyor =
        original == "lm_head.weight" ? "output_layer.weight" : "embedding.word_embeddings.weight";
    for (const int64_t first_row : {int64_t{0}, m.vocab / 2}) {
      HfElementRequest request;
      for (int64_t i = first_row * m.hidden; i < (first_row + m.vocab / 2) * m.hidden; ++i) {
        request[conveyor].push_back(i);
      }
      const absl::StatusOr<HfElementValues> slice =
          ReadHfSlices(dir, config->config(), request, nullptr);
      if (first_row == 0) {
        EXPECT_TRUE(slice.ok()) << slice.status();
      } else {
        EXPECT_THAT(std::string(slice.status().message()), HasSubstr(copy + " in "));
        EXPECT_EQ(slice.status().code(), absl::StatusCode::kInvalidArgument);
      }
    }
  }
  // A copy of -0 where the original holds 0: equal as floats, not bit for bit.
  HfTensorMap weights = RandomWeights(m, 43);
  weights["model.embed_tokens.weight"].data[0] = 0.0f;
  weights[depth + "embed_tokens.weight"] = weights.at("model.embed_tokens.weight");
  weights[depth + "embed_tokens.weight"].data[0] = -0.0f;
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, "copy_negative_zero");
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(std::string(ReadHf(dir, config->config()).status().message()),
              HasSubstr("at element 0"));
}

// The export writes DeepseekV3's router, which scores a group by its best 2: a model whose
// groups are scored otherwise (Megatron's topk / group_topk = 1 here) is refused by name.
TEST(DeepseekConfigTest, ExportRefusesGroupsScoredByOtherThanTwo) {
  const TinyDeepseek m = Models()[4];
  ASSERT_EQ(m.topk / m.topk_groups, 1);
  const std::string dir = WriteHfFolder(ConfigJson(m), RandomWeights(m, 7), "scored_by_three");
  const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  Config c = config->config();
  EXPECT_TRUE(LlamaDimsFromConfig(c, config->padded_vocab_size()).ok());
  c.mutable_model()->set_moe_router_group_score_topk(0);
  const absl::StatusOr<LlamaDims> refused = LlamaDimsFromConfig(c, config->padded_vocab_size());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("expert groups are scored by their 1 best experts "
                        "(--moe-router-group-score-topk 0, --moe-router-topk 4, "
                        "--moe-router-group-topk 4); DeepSeek-V3 scores a group by its 2 best"));
}

INSTANTIATE_TEST_SUITE_P(Variants, DeepseekReferenceTest, ::testing::ValuesIn(Models()),
                         [](const ::testing::TestParamInfo<TinyDeepseek>& test) {
                           return test.param.name;
                         });

// A field that changes the math and that Conveyor does not compute stops the import,
// named with its value.
TEST(DeepseekConfigTest, FieldsConveyorDoesNotComputeAreRefusedByName) {
  struct Case {
    TinyDeepseek model;
    std::string field, replacement, message;
  };
  const TinyDeepseek v3 = Models()[0], yarn = Models()[2];
  const std::vector<Case> cases = {
      {v3, "\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\"",
       "scoring_func = \"softmax\""},
      {v3, "\"topk_method\": \"noaux_tc\"", "\"topk_method\": \"greedy\"",
       "topk_method = \"greedy\""},
      {v3, "\"norm_topk_prob\": true", "\"norm_topk_prob\": false",
       "norm_topk_prob = false with num_experts_per_tok = 4"},
      {v3, "\"head_dim\": 4", "\"head_dim\": 6", "head_dim = 6 is not qk_rope_head_dim = 4"},
      {yarn, "\"mscale\": 1.0, ", "", "rope_scaling.mscale_all_dim = 0.8 without mscale"},
  };
  const HfTensorMap weights = RandomWeights(v3, 1);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string json = ConfigJson(cases[i].model);
    json.replace(json.find(cases[i].field), cases[i].field.size(), cases[i].replacement);
    const std::string dir = WriteHfFolder(json, weights, absl::StrCat("refused_", i));
    const absl::StatusOr<ResolvedConfig> config = ConfigFor(dir);
    ASSERT_FALSE(config.ok()) << cases[i].message;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(cases[i].message));
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace conveyor
