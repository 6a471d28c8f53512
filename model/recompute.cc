#include "model/recompute.h"

#include <optional>

#include "proto/config_choices.h"

namespace conveyor {

bool RecomputePolicy::Recomputes(int64_t index) const {
  switch (full) {
    case Full::kNone:
      return false;
    case Full::kUniform:
      return true;
    case Full::kBlock:
      return index < num_layers;
  }
  return false;
}

bool RecomputePolicy::KeepsCheckpoint(int64_t index) const {
  if (!Recomputes(index)) return false;
  return full == Full::kBlock || index % num_layers == 0;
}

int64_t RecomputePolicy::GroupStart(int64_t index) const {
  return full == Full::kUniform ? index - index % num_layers : index;
}

RecomputePolicy RecomputePolicyFromConfig(const Config& config) {
  const RecomputeConfig& r = config.recompute();
  RecomputePolicy policy;
  const std::optional<RecomputeGranularity> granularity =
      ParseChoice<RecomputeGranularity>(r.recompute_granularity());
  if (granularity == RecomputeGranularity::kFull) {
    policy.full = ParseChoice<RecomputeMethod>(r.recompute_method()) == RecomputeMethod::kBlock
                      ? RecomputePolicy::Full::kBlock
                      : RecomputePolicy::Full::kUniform;
    policy.num_layers = r.recompute_num_layers();
  } else if (granularity == RecomputeGranularity::kSelective) {
    for (const std::string& module : r.recompute_modules()) {
      if (module == "core_attn") policy.selective.core_attn = true;
      if (module == "mlp") policy.selective.mlp = true;
      if (module == "layernorm") policy.selective.layernorm = true;
    }
  }
  return policy;
}

}  // namespace conveyor
