// Megatron-LM flags that Conveyor does not take, each with what to do instead: a script
// written for Megatron then fails with the reason and the fix, not just "unknown flag".
#ifndef CONVEYOR_TRAINER_MEGATRON_FLAGS_NOT_HERE_H_
#define CONVEYOR_TRAINER_MEGATRON_FLAGS_NOT_HERE_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace conveyor {

// For a Megatron flag spelt "--name" (dashes), why Conveyor has none and what to do
// instead; nullopt for any other name.
std::optional<std::string> MegatronFlagNotHere(absl::string_view flag);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_MEGATRON_FLAGS_NOT_HERE_H_
