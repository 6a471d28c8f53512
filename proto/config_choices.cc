#include "proto/config_choices.h"

#include <utility>

namespace conveyor {
namespace {

template <typename Enum>
struct Choices;

#define CONVEYOR_CHOICES(Enum, ...)                                              \
  template <>                                                                    \
  struct Choices<Enum> {                                                         \
    static constexpr std::pair<Enum, std::string_view> kTable[] = {__VA_ARGS__}; \
  }

CONVEYOR_CHOICES(PositionEmbeddingType,
                 {PositionEmbeddingType::kLearnedAbsolute, "learned_absolute"},
                 {PositionEmbeddingType::kRope, "rope"}, {PositionEmbeddingType::kYarn, "yarn"},
                 {PositionEmbeddingType::kNone, "none"});
CONVEYOR_CHOICES(Normalization, {Normalization::kLayerNorm, "LayerNorm"},
                 {Normalization::kRmsNorm, "RMSNorm"});
CONVEYOR_CHOICES(DeviceKind, {DeviceKind::kAuto, "auto"}, {DeviceKind::kCpu, "cpu"},
                 {DeviceKind::kCuda, "cuda"});
CONVEYOR_CHOICES(NanPolicy, {NanPolicy::kStop, "stop"}, {NanPolicy::kSkip, "skip"});
CONVEYOR_CHOICES(OptimizerKind, {OptimizerKind::kAdam, "adam"}, {OptimizerKind::kSgd, "sgd"});
CONVEYOR_CHOICES(LrDecayStyle, {LrDecayStyle::kConstant, "constant"},
                 {LrDecayStyle::kLinear, "linear"}, {LrDecayStyle::kCosine, "cosine"},
                 {LrDecayStyle::kInverseSquareRoot, "inverse-square-root"},
                 {LrDecayStyle::kWsd, "WSD"});
CONVEYOR_CHOICES(LrWsdDecayStyle, {LrWsdDecayStyle::kExponential, "exponential"},
                 {LrWsdDecayStyle::kLinear, "linear"}, {LrWsdDecayStyle::kCosine, "cosine"},
                 {LrWsdDecayStyle::kMinusSqrt, "minus_sqrt"});
CONVEYOR_CHOICES(RecomputeGranularity, {RecomputeGranularity::kNone, ""},
                 {RecomputeGranularity::kFull, "full"},
                 {RecomputeGranularity::kSelective, "selective"});
CONVEYOR_CHOICES(RecomputeMethod, {RecomputeMethod::kNone, ""},
                 {RecomputeMethod::kUniform, "uniform"}, {RecomputeMethod::kBlock, "block"});
CONVEYOR_CHOICES(MoeRouterScoreFunction, {MoeRouterScoreFunction::kSoftmax, "softmax"},
                 {MoeRouterScoreFunction::kSigmoid, "sigmoid"});
CONVEYOR_CHOICES(MoeLoadBalancingType, {MoeLoadBalancingType::kAuxLoss, "aux_loss"},
                 {MoeLoadBalancingType::kSeqAuxLoss, "seq_aux_loss"},
                 {MoeLoadBalancingType::kGlobalAuxLoss, "global_aux_loss"},
                 {MoeLoadBalancingType::kNone, "none"},
                 {MoeLoadBalancingType::kSinkhorn, "sinkhorn"},
                 {MoeLoadBalancingType::kQuantileBalancing, "quantile_balancing"});
CONVEYOR_CHOICES(MoeTokenDropPolicy, {MoeTokenDropPolicy::kProbs, "probs"},
                 {MoeTokenDropPolicy::kPosition, "position"});
CONVEYOR_CHOICES(MoeTokenDispatcherType, {MoeTokenDispatcherType::kAllgather, "allgather"},
                 {MoeTokenDispatcherType::kAlltoall, "alltoall"});
CONVEYOR_CHOICES(MoeRouterDtype, {MoeRouterDtype::kCompute, ""}, {MoeRouterDtype::kFp32, "fp32"},
                 {MoeRouterDtype::kFp64, "fp64"});

#undef CONVEYOR_CHOICES

}  // namespace

template <typename Enum>
std::optional<Enum> ParseChoice(std::string_view text) {
  for (const auto& [value, name] : Choices<Enum>::kTable) {
    if (name == text) return value;
  }
  return std::nullopt;
}

template <typename Enum>
std::string_view ChoiceName(Enum value) {
  for (const auto& [v, name] : Choices<Enum>::kTable) {
    if (v == value) return name;
  }
  return {};
}

#define CONVEYOR_INSTANTIATE(Enum)                                  \
  template std::optional<Enum> ParseChoice<Enum>(std::string_view); \
  template std::string_view ChoiceName<Enum>(Enum)

CONVEYOR_INSTANTIATE(PositionEmbeddingType);
CONVEYOR_INSTANTIATE(Normalization);
CONVEYOR_INSTANTIATE(DeviceKind);
CONVEYOR_INSTANTIATE(NanPolicy);
CONVEYOR_INSTANTIATE(OptimizerKind);
CONVEYOR_INSTANTIATE(LrDecayStyle);
CONVEYOR_INSTANTIATE(LrWsdDecayStyle);
CONVEYOR_INSTANTIATE(RecomputeGranularity);
CONVEYOR_INSTANTIATE(RecomputeMethod);
CONVEYOR_INSTANTIATE(MoeRouterScoreFunction);
CONVEYOR_INSTANTIATE(MoeLoadBalancingType);
CONVEYOR_INSTANTIATE(MoeTokenDropPolicy);
CONVEYOR_INSTANTIATE(MoeTokenDispatcherType);
CONVEYOR_INSTANTIATE(MoeRouterDtype);

#undef CONVEYOR_INSTANTIATE

}  // namespace conveyor
