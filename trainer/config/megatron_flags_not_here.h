// Megatron-LM flags that are not Conveyor flags, answered from the table of
// trainer/config/megatron_flag_table.h before Conveyor's own parser runs:
//   - no-ops are dropped with their values and named, with why, in one warning line
//     per group (MegatronNoOpWarnings);
//   - refused flags stop the command line with one line per feature naming every flag
//     of it that was used, and why it is absent;
//   - Megatron's other spellings become the Conveyor flag they mean.
// A Conveyor flag always wins over the table, and "--no-X" where X is a Conveyor
// switch is Megatron's store_false spelling of "--X=false".
#ifndef CONVEYOR_TRAINER_CONFIG_MEGATRON_FLAGS_NOT_HERE_H_
#define CONVEYOR_TRAINER_CONFIG_MEGATRON_FLAGS_NOT_HERE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "trainer/config/megatron_flag_table.h"

namespace conveyor {

// A flag of the table, and how many values Megatron gives it.
struct MegatronFlagEntry {
  enum class Values { kNone, kOne, kSome, kUnstated };  // kUnstated: a refusal or a prefix
  const MegatronFlagGroup* group = nullptr;
  Values values = Values::kUnstated;
};

// The table's entry for "--name" (dashes, no value), or {nullptr} when it has none.
MegatronFlagEntry FindMegatronFlag(absl::string_view flag);

// Every name the table lists one by one (not its prefixes), for "did you mean".
std::vector<std::string> MegatronFlagNames();

// What Conveyor's own parser knows of a flag name: nothing, a switch, or a flag that
// takes a value.
enum class ConveyorFlag { kUnknown, kSwitch, kValued };

struct MegatronFlagSplit {
  std::vector<std::string> kept;      // for Conveyor's parser; aliases rewritten at the end
  std::vector<std::string> ignored;   // the no-ops as given ("--transformer-impl local")
  std::vector<std::string> problems;  // refusals (one per group) and misspelt forms
};

// Splits argv (without argv[0]). A flag is recognised spelt with dashes or underscores,
// as Conveyor's parser recognises its own; `conveyor_flag` says which names are
// Conveyor's.
MegatronFlagSplit SplitMegatronFlags(
    const std::vector<std::string>& args,
    const std::function<ConveyorFlag(absl::string_view)>& conveyor_flag);

// The no-ops of `ignored` that are no-ops only with another flag's value
// (MegatronFlagGroup::only_with) and whose condition does not hold: a refusal line for
// each. `value_of` gives a Conveyor flag's parsed value as text.
std::vector<std::string> MegatronConditionProblems(
    const std::vector<std::string>& ignored,
    const std::function<std::string(absl::string_view)>& value_of);

// The warning lines for `ignored`, one per group, each naming its flags as given and
// why they change nothing; no trailing newlines.
std::vector<std::string> MegatronNoOpWarnings(const std::vector<std::string>& ignored);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_MEGATRON_FLAGS_NOT_HERE_H_
