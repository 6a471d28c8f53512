#include "trainer/config/attention_positions.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/moe_layer_pattern.h"

namespace conveyor {
namespace {

// Which layers slide: Megatron's is_layer_window_attention. An integer N makes layers
// N, 2N, ... (1-based) full attention; a list gives 1 (slide) or 0 (full) per layer.
absl::StatusOr<std::vector<bool>> SlidingLayers(const ModelConfig& m) {
  const int64_t layers = m.num_layers();
  const std::string& text = m.window_attn_skip_freq();
  if (text.empty()) return std::vector<bool>(layers, true);
  int64_t every = 0;
  if (absl::SimpleAtoi(text, &every)) {
    if (every < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--window-attn-skip-freq ", text,
                                                     ": an integer frequency must be at least 1"));
    }
    std::vector<bool> slides(layers);
    for (int64_t l = 0; l < layers; ++l) slides[l] = (l + 1) % every != 0;
    return slides;
  }
  absl::StatusOr<std::vector<int64_t>> list =
      ParseLayerListExpression(text, layers, "--window-attn-skip-freq");
  if (!list.ok()) return list.status();
  if (static_cast<int64_t>(list->size()) != layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--window-attn-skip-freq '", text, "' gives ", list->size(), " layers but --num-layers is ",
        layers, "; give one 1 (sliding) or 0 (full) per layer"));
  }
  std::vector<bool> slides;
  for (const int64_t v : *list) {
    if (v != 0 && v != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--window-attn-skip-freq '", text,
                                                     "': entries are 1 (sliding window) or 0 "
                                                     "(full attention), not ",
                                                     v));
    }
    slides.push_back(v == 1);
  }
  return slides;
}

void CheckWindow(const Config& c, std::vector<std::string>* out) {
  const ModelConfig& m = c.model();
  const absl::StatusOr<std::optional<WindowSize>> window = ParseWindowSize(m.window_size());
  if (!window.ok()) {
    out->push_back(std::string(window.status().message()));
    return;
  }
  if (!window->has_value()) {
    if (!m.window_attn_skip_freq().empty()) {
      out->push_back(absl::StrCat("--window-attn-skip-freq ", m.window_attn_skip_freq(),
                                  " picks the layers that slide, but no --window-size is "
                                  "given: add --window-size L,0 or drop the flag"));
    }
    return;
  }
  const absl::StatusOr<std::vector<bool>> layers = SlidingLayers(m);
  if (!layers.ok()) out->push_back(std::string(layers.status().message()));
  if (ParseChoice<DeviceKind>(c.parallel().device()) == DeviceKind::kCuda) {
    out->push_back(
        "--window-size with --device cuda: the sliding window's CUDA kernels are written and "
        "compiled but have never run on a GPU (cuda_attention_test checks them when one is "
        "there); run it with --device cpu, or drop --window-size");
  }
}

bool Positive(double v) { return v > 0 && std::isfinite(v); }

void CheckLlama3(const ModelConfig& m, PositionEmbeddingType positions,
                 std::vector<std::string>* out) {
  if (!m.use_rope_scaling()) return;
  if (positions != PositionEmbeddingType::kRope) {
    out->push_back(absl::StrCat(
        "--use-rope-scaling scales RoPE's frequencies (Llama 3.1) but --position-embedding-type "
        "is ",
        m.position_embedding_type(),
        positions == PositionEmbeddingType::kYarn ? " (which scales by --rotary-scaling-factor)"
                                                  : "",
        ": use --position-embedding-type rope, or drop --use-rope-scaling"));
    return;
  }
  if (!Positive(m.rope_scaling_factor())) {
    out->push_back(absl::StrCat("--rope-scaling-factor ", m.rope_scaling_factor(),
                                " must be a positive number (Llama 3.1: 8)"));
  }
  if (!Positive(m.rope_scaling_low_freq_factor()) ||
      !(m.rope_scaling_high_freq_factor() > m.rope_scaling_low_freq_factor()) ||
      !std::isfinite(m.rope_scaling_high_freq_factor())) {
    out->push_back(absl::StrCat(
        "--rope-scaling-low-freq-factor ", m.rope_scaling_low_freq_factor(),
        " and --rope-scaling-high-freq-factor ", m.rope_scaling_high_freq_factor(),
        " must satisfy 0 < low < high: the band between them is blended by (L / w - low) / "
        "(high - low) (Llama 3.1: 1 and 4)"));
  }
  if (m.rope_scaling_original_max_position_embeddings() <= 0) {
    out->push_back(absl::StrCat("--rope-scaling-original-max-position-embeddings ",
                                m.rope_scaling_original_max_position_embeddings(),
                                " must be positive (Llama 3.1: 8192)"));
  }
}

void CheckYarn(const ModelConfig& m, std::vector<std::string>* out) {
  if (m.rotary_percent() != 1.0f) {
    out->push_back(absl::StrCat(
        "--rotary-percent ", m.rotary_percent(),
        " with --position-embedding-type yarn: YaRN scales the frequencies of every "
        "--kv-channels dimension (Megatron's YarnRotaryEmbedding rotates them all whatever "
        "--rotary-percent says); drop --rotary-percent"));
  }
  const std::pair<const char*, double> positive[] = {
      {"--rotary-scaling-factor", m.rotary_scaling_factor()},
      {"--yarn-beta-fast", m.yarn_beta_fast()},
      {"--yarn-beta-slow", m.yarn_beta_slow()},
      {"--yarn-original-max-position-embeddings",
       static_cast<double>(m.yarn_original_max_position_embeddings())}};
  for (const auto& [flag, value] : positive) {
    if (!Positive(value)) {
      out->push_back(
          absl::StrCat(flag, " ", value, " must be a positive number (YaRN takes its logarithm)"));
    }
  }
  for (const auto& [flag, value] : {std::pair<const char*, double>{"--mscale", m.mscale()},
                                    {"--mscale-all-dim", m.mscale_all_dim()}}) {
    if (!std::isfinite(value)) out->push_back(absl::StrCat(flag, " ", value, " must be finite"));
  }
  if (Positive(m.rotary_scaling_factor()) &&
      !(RopeConcentration(RopeScalingFromConfig(m, PositionEmbeddingType::kYarn)) > 0)) {
    out->push_back(absl::StrCat("--mscale ", m.mscale(), " and --mscale-all-dim ",
                                m.mscale_all_dim(),
                                " give YaRN a concentration factor that is not positive: "
                                "(0.1 mscale ln s + 1) / (0.1 mscale-all-dim ln s + 1)"));
  }
}

}  // namespace

absl::StatusOr<std::optional<WindowSize>> ParseWindowSize(absl::string_view text) {
  if (text.empty()) return std::nullopt;
  absl::string_view inner = text;
  absl::ConsumePrefix(&inner, "(");
  absl::ConsumeSuffix(&inner, ")");
  const std::vector<absl::string_view> parts = absl::StrSplit(inner, ',');
  WindowSize w;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &w.left) ||
      !absl::SimpleAtoi(parts[1], &w.right) || w.left < -1 || w.right < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--window-size '", text,
        "' is not a window: give Megatron's (left, right) as two integers L,R (e.g. 4095,0), "
        "each >= 0 or -1 for an unbounded side"));
  }
  if (w.right != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window-size '", text,
                     "': attention here is causal, so a query sees no key after "
                     "it; give the right side as 0 (--window-size ",
                     w.left, ",0), as Transformer Engine uses it under a causal mask"));
  }
  return w;
}

std::vector<int64_t> LayerWindowsFromConfig(const ModelConfig& m) {
  const absl::StatusOr<std::optional<WindowSize>> window = ParseWindowSize(m.window_size());
  if (!window.ok() || !window->has_value() || (*window)->left < 0) return {};
  const std::vector<bool> slides =
      SlidingLayers(m).value_or(std::vector<bool>(m.num_layers(), true));
  std::vector<int64_t> windows;
  for (const bool s : slides) windows.push_back(s ? (*window)->left : -1);
  return windows;
}

RopeScaling RopeScalingFromConfig(const ModelConfig& m, PositionEmbeddingType positions) {
  RopeScaling s;
  if (positions == PositionEmbeddingType::kYarn) {
    s.kind = RopeScalingKind::kYarn;
    s.factor = m.rotary_scaling_factor();
    s.original_max_positions = m.yarn_original_max_position_embeddings();
    s.beta_fast = m.yarn_beta_fast();
    s.beta_slow = m.yarn_beta_slow();
    s.mscale = m.mscale();
    s.mscale_all_dim = m.mscale_all_dim();
    s.round_to_int = m.yarn_correction_range_round_to_int();
  } else if (positions == PositionEmbeddingType::kRope && m.use_rope_scaling()) {
    s.kind = RopeScalingKind::kLlama3;
    s.factor = m.rope_scaling_factor();
    s.original_max_positions = m.rope_scaling_original_max_position_embeddings();
    s.low_freq_factor = m.rope_scaling_low_freq_factor();
    s.high_freq_factor = m.rope_scaling_high_freq_factor();
  }
  return s;
}

std::vector<std::string> AttentionPositionProblems(const Config& config) {
  const ModelConfig& m = config.model();
  std::vector<std::string> out;
  const std::optional<PositionEmbeddingType> positions =
      ParseChoice<PositionEmbeddingType>(m.position_embedding_type());
  if (positions.has_value()) {
    CheckLlama3(m, *positions, &out);
    if (*positions == PositionEmbeddingType::kYarn) CheckYarn(m, &out);
  }
  CheckWindow(config, &out);
  return out;
}

}  // namespace conveyor
