// The rules of multi-latent attention's flags (--multi-latent-attention, --q-lora-rank,
// --kv-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim; Megatron's meaning,
// model/model_shape.h's MlaShape): one problem line per broken rule, each naming its flag
// and the fix (part of ValidateConfig).
#ifndef CONVEYOR_TRAINER_CONFIG_MLA_VALIDATION_H_
#define CONVEYOR_TRAINER_CONFIG_MLA_VALIDATION_H_

#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

std::vector<std::string> MlaProblems(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_MLA_VALIDATION_H_
