// Megatron-LM flags that Conveyor has no field for, in two kinds:
//   - no-ops: flags that change nothing here (kernel fusion switches, logging to
//     services Conveyor does not write, PyTorch housekeeping, ...). A Megatron script
//     runs unchanged: they are dropped before parsing and named in one warning line.
//   - refused: flags that would change the math or the run and are not implemented.
//     Parsing fails with the reason and what to do instead, not "unknown flag".
#ifndef CONVEYOR_TRAINER_MEGATRON_FLAGS_NOT_HERE_H_
#define CONVEYOR_TRAINER_MEGATRON_FLAGS_NOT_HERE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace conveyor {

// For a refused Megatron flag spelt "--name" (dashes), why Conveyor has none and what
// to do instead; nullopt for any other name.
std::optional<std::string> MegatronFlagNotHere(absl::string_view flag);

// For a no-op Megatron flag spelt "--name", why it changes nothing here; nullopt for
// any other name. Some flags are no-ops at one value only (--context-parallel-size 1):
// they are listed here with that value named in the reason, and refused at others.
std::optional<std::string> MegatronNoOpReason(absl::string_view flag);

// `args` with the no-op Megatron flags (and their values) taken out, and those flags
// as given ("--transformer-impl local"), in order. A flag is recognised spelt with
// dashes or underscores, as the parser recognises flags; one whose value is not the
// no-op value stays in `kept`, for the parser to refuse.
struct MegatronNoOpSplit {
  std::vector<std::string> kept;
  std::vector<std::string> ignored;
};
MegatronNoOpSplit SplitMegatronNoOpFlags(const std::vector<std::string>& args);

// The one warning line for `ignored` (non-empty), without a trailing newline.
std::string MegatronNoOpWarning(const std::vector<std::string>& ignored);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_MEGATRON_FLAGS_NOT_HERE_H_
