#include "trainer/megatron_flags_not_here.h"

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace conveyor {
namespace {

constexpr char kAlwaysFused[] =
    "Conveyor fuses its kernels without changing the math and has no switch for it";
constexpr char kNoExternalLogger[] =
    "Conveyor writes no Weights & Biases logs (--tensorboard-dir DIR writes TensorBoard "
    "event files; --metrics-file FILE every log line's figures as JSON lines)";
constexpr char kOneImplementation[] = "Conveyor has one model implementation (model/)";
constexpr char kOneDatasetFormat[] =
    "Conveyor reads Megatron's .bin/.idx datasets, the only format, always memory-mapped";
constexpr char kNoLossScaling[] =
    "loss scaling is for fp16, which Conveyor does not train; bf16 (--bf16) needs none; drop "
    "the flag";
constexpr char kNoPython[] =
    "Conveyor is not a Python process: there is no garbage collector "
    "or caching allocator to tune";
constexpr char kNoFp8[] = "not implemented: Conveyor trains in bf16 (--bf16) or fp32";

// A Megatron flag that changes nothing here.
struct NoOp {
  bool takes_value;
  // When set, the flag is a no-op only at this value (compared as numbers when both
  // are); at any other value it is refused (MegatronFlagNotHere).
  const char* only_value;
  const char* reason;
};

const std::map<std::string, NoOp, std::less<>>& NoOps() {
  static const auto* no_ops = new std::map<std::string, NoOp, std::less<>>{
      {"--no-masked-softmax-fusion", {false, nullptr, kAlwaysFused}},
      {"--no-bias-gelu-fusion", {false, nullptr, kAlwaysFused}},
      {"--no-bias-dropout-fusion", {false, nullptr, kAlwaysFused}},
      {"--no-bias-swiglu-fusion", {false, nullptr, kAlwaysFused}},
      {"--no-gradient-accumulation-fusion", {false, nullptr, kAlwaysFused}},
      {"--no-persist-layer-norm", {false, nullptr, kAlwaysFused}},
      {"--no-rope-fusion", {false, nullptr, kAlwaysFused}},
      {"--apply-rope-fusion", {false, nullptr, kAlwaysFused}},
      {"--cross-entropy-loss-fusion", {false, nullptr, kAlwaysFused}},
      {"--no-async-tensor-model-parallel-allreduce", {false, nullptr, kAlwaysFused}},
      {"--tp-comm-overlap", {false, nullptr, kAlwaysFused}},
      {"--attention-backend",
       {true, nullptr, "Conveyor picks its attention kernel itself (the backend line says which)"}},
      {"--attention-softmax-in-fp32",
       {false, nullptr, "Conveyor's attention softmax always computes in fp32"}},
      {"--accumulate-allreduce-grads-in-fp32",
       {false, nullptr, "Conveyor always accumulates and reduces gradients in fp32"}},
      {"--transformer-impl", {true, nullptr, kOneImplementation}},
      {"--use-mcore-models", {false, nullptr, kOneImplementation}},
      {"--use-legacy-models", {false, nullptr, kOneImplementation}},
      {"--use-cpu-initialization",
       {false, nullptr, "Conveyor always initialises the parameters on the host"}},
      {"--distributed-backend",
       {true, nullptr,
        "Conveyor moves host buffers with gloo and GPU buffers with NCCL, chosen per buffer"}},
      {"--data-impl", {true, nullptr, kOneDatasetFormat}},
      {"--dataset-impl", {true, nullptr, kOneDatasetFormat}},
      {"--no-mmap-bin-files", {false, nullptr, kOneDatasetFormat}},
      {"--num-workers",
       {true, nullptr,
        "Conveyor builds its batches in the trainer itself, with no worker "
        "processes"}},
      {"--no-create-attention-mask-in-dataloader",
       {false, nullptr, "the causal mask is never materialised"}},
      {"--dataloader-type", {true, "single", "Conveyor reads samples in Megatron's single order"}},
      {"--ckpt-format",
       {true, nullptr,
        "Conveyor writes one format, which reshards to any layout (trainer/checkpoint/FORMAT.md)"}},
      {"--wandb-project", {true, nullptr, kNoExternalLogger}},
      {"--wandb-exp-name", {true, nullptr, kNoExternalLogger}},
      {"--wandb-save-dir", {true, nullptr, kNoExternalLogger}},
      {"--log-throughput",
       {false, nullptr, "Conveyor always logs throughput (tokens per second, TFLOP/s per GPU)"}},
      {"--timing-log-level",
       {true, nullptr,
        "Conveyor always logs the forward-backward, gradient-reduction and optimizer times"}},
      {"--manual-gc", {false, nullptr, kNoPython}},
      {"--manual-gc-interval", {true, nullptr, kNoPython}},
      {"--empty-unused-memory-level", {true, nullptr, kNoPython}},
      {"--apply-layernorm-1p",
       {false, nullptr,
        "Megatron then stores each norm's gain g as g - 1 (zero-initialised); norm weights "
        "take no weight decay, there and here, so storing g itself trains identically"}},
  };
  return *no_ops;
}

const std::map<std::string, std::string, std::less<>>& Explanations() {
  static const auto* explanations = new std::map<std::string, std::string, std::less<>>{
      {"--use-checkpoint-args",
       "not implemented: pass the model flags again (--load checks them against the "
       "checkpoint's shapes)"},
      {"--tiktoken-special-tokens",
       "not implemented: TikTokenizer's special tokens are Megatron's defaults (<unk> <s> </s>, "
       "then <SPECIAL_i> up to --tiktoken-num-special-tokens); drop the flag"},
      {"--no-position-embedding",
       "positions come from --position-embedding-type alone: rope keeps no learned table "
       "(what Megatron's --position-embedding-type rope --no-position-embedding means); drop "
       "the flag"},
      {"--dataloader-type",
       "Conveyor reads samples in Megatron's default (single) order, shuffled per epoch by "
       "--seed; drop the flag"},
      {"--loss-scale", kNoLossScaling},
      {"--initial-loss-scale", kNoLossScaling},
      {"--fp8-format", kNoFp8},
      {"--fp8-amax-history-len", kNoFp8},
      {"--fp8-amax-compute-algo", kNoFp8},
      {"--fp8-param-gather", kNoFp8},
      {"--decoupled-lr",
       "not implemented: the embedding and output layer learn at --lr like every other "
       "parameter"},
      {"--decoupled-min-lr",
       "not implemented: the embedding and output layer learn at --lr like every other "
       "parameter"},
      {"--use-rope-scaling",
       "not implemented: Conveyor's RoPE is unscaled (Llama 3.1's frequency scaling changes "
       "the positions' angles)"},
  };
  return *explanations;
}

// "--flag_name=v" -> "--flag-name": the spelling the tables use.
std::string DashedName(absl::string_view arg) {
  const size_t eq = arg.find('=');
  const absl::string_view name = arg.substr(2, eq == absl::string_view::npos ? arg.npos : eq - 2);
  return absl::StrCat("--", absl::StrReplaceAll(name, {{"_", "-"}}));
}

bool SameValue(absl::string_view given, absl::string_view wanted) {
  if (given == wanted) return true;
  char* end = nullptr;
  const std::string text(given);
  const double number = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && number == std::strtod(wanted.data(), nullptr);
}

}  // namespace

std::optional<std::string> MegatronFlagNotHere(absl::string_view flag) {
  const auto& explanations = Explanations();
  const auto it = explanations.find(flag);
  if (it == explanations.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> MegatronNoOpReason(absl::string_view flag) {
  const auto it = NoOps().find(flag);
  if (it == NoOps().end()) return std::nullopt;
  if (it->second.only_value == nullptr) return std::string(it->second.reason);
  return absl::StrCat("at ", it->second.only_value, " only: ", it->second.reason);
}

MegatronNoOpSplit SplitMegatronNoOpFlags(const std::vector<std::string>& args) {
  MegatronNoOpSplit split;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const auto it = absl::StartsWith(arg, "--") ? NoOps().find(DashedName(arg)) : NoOps().end();
    if (it == NoOps().end()) {
      split.kept.push_back(arg);
      continue;
    }
    const NoOp& no_op = it->second;
    const size_t eq = arg.find('=');
    std::optional<std::string> value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (no_op.takes_value && i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
      value = args[i + 1];
    }
    if (no_op.only_value != nullptr &&
        !(value.has_value() && SameValue(*value, no_op.only_value))) {
      split.kept.push_back(arg);  // the parser refuses it, with the reason
      continue;
    }
    if (value.has_value() && eq == std::string::npos) ++i;
    split.ignored.push_back(
        value.has_value() && eq == std::string::npos ? absl::StrCat(arg, " ", *value) : arg);
  }
  return split;
}

std::string MegatronNoOpWarning(const std::vector<std::string>& ignored) {
  return absl::StrCat(
      "warning: Megatron flags that change nothing here were ignored (README: Megatron flags): ",
      absl::StrJoin(ignored, ", "));
}

}  // namespace conveyor
