// The choice fields of conveyor.Config (string fields with a (choices) option) as
// enums, for code that branches on them. The proto keeps the strings (flags, printed
// config and checkpoint manifests are unchanged); this is the one mapping between the
// two. tests/trainer/resolved_config_test.cc checks that every choice the proto
// declares has its enum value.
//
// Not here: --pipeline-schedule, whose names are the schedule registry's keys
// (pipeline::ScheduleByName), and --tokenizer-type, whose names the tokenizer factory
// maps (data/tokenizers/tokenizer_factory.h).
#ifndef CONVEYOR_PROTO_CONFIG_CHOICES_H_
#define CONVEYOR_PROTO_CONFIG_CHOICES_H_

#include <optional>
#include <string_view>

namespace conveyor {

enum class PositionEmbeddingType { kLearnedAbsolute, kRope, kYarn, kNone };  // --position-embedding-type
enum class Normalization { kLayerNorm, kRmsNorm };             // --normalization
enum class DeviceKind { kAuto, kCpu, kCuda };                  // --device
enum class NanPolicy { kStop, kSkip };                         // --nan-policy
enum class OptimizerKind { kAdam, kSgd };                      // --optimizer
enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot, kWsd };  // --lr-decay-style
enum class LrWsdDecayStyle { kExponential, kLinear, kCosine, kMinusSqrt };  // --lr-wsd-decay-style
enum class RecomputeGranularity { kNone, kFull, kSelective };  // --recompute-granularity ("")
enum class RecomputeMethod { kNone, kUniform, kBlock };        // --recompute-method ("")
// --moe-router-score-function, --moe-router-load-balancing-type, --moe-token-drop-policy,
// --moe-token-dispatcher-type, --moe-router-dtype ("")
enum class MoeRouterScoreFunction { kSoftmax, kSigmoid };
enum class MoeLoadBalancingType {
  kAuxLoss,
  kSeqAuxLoss,
  kGlobalAuxLoss,
  kNone,
  kSinkhorn,           // refused by validation
  kQuantileBalancing,  // refused by validation
};
enum class MoeTokenDropPolicy { kProbs, kPosition };
enum class MoeTokenDispatcherType { kAllgather, kAlltoall };
enum class MoeRouterDtype { kCompute, kFp32, kFp64 };

// The enum value of a choice string; nullopt for a string that is not one of the
// field's choices (a config that has not been validated).
template <typename Enum>
std::optional<Enum> ParseChoice(std::string_view text);

// The choice string of an enum value, as the proto spells it.
template <typename Enum>
std::string_view ChoiceName(Enum value);

// For validated strings: the enum value, or `fallback` for a string that is no choice.
template <typename Enum>
Enum ChoiceOr(std::string_view text, Enum fallback) {
  return ParseChoice<Enum>(text).value_or(fallback);
}

}  // namespace conveyor

#endif  // CONVEYOR_PROTO_CONFIG_CHOICES_H_
