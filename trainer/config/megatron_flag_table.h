// The answer Conveyor gives each flag of Megatron-LM's argument parser
// (megatron/training/arguments.py) that is not one of its own flags: the table is data,
// grouped by feature, one reason per group, reviewed like code. Conveyor's own flags come
// from proto/config.proto (trainer/config/flags.h) and are never listed here; a test checks every
// flag of Megatron's parser against the two (tests/testdata/megatron/flags.tsv).
#ifndef CONVEYOR_TRAINER_CONFIG_MEGATRON_FLAG_TABLE_H_
#define CONVEYOR_TRAINER_CONFIG_MEGATRON_FLAG_TABLE_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace conveyor {

enum class MegatronAnswer {
  // Changes nothing here: dropped before parsing and named, with the group's reason,
  // in one warning line per group. Only where that is true: a flag that would change
  // the math or the result is refused instead.
  kNoOp,
  // Not implemented, or not part of Conveyor: the command line is refused with one
  // line per group naming the group's flags it used and the reason.
  kRefused,
  // Megatron's other spelling of a Conveyor setting: rewritten to `reason`, a Conveyor
  // flag (with the Megatron flag's value, if it takes one, after it), placed after
  // every other flag, as Megatron's validate_args applies it after parsing.
  kAlias,
};

struct MegatronFlagGroup {
  MegatronAnswer answer;
  // The group's flags, separated by spaces: "--name" is a switch, "--name=V" takes one
  // value, "--name=V..." one or more (Megatron's nargs='+'), and "--prefix-*" (refusals
  // only) every flag that starts with "--prefix-".
  absl::string_view flags;
  // Why (kNoOp: why it changes nothing; kRefused: what the feature is and why it is
  // absent), or, for kAlias, the Conveyor flag it becomes.
  absl::string_view reason;
  // kNoOp only: a no-op at this value only (compared as numbers when both are); the
  // flag at any other value is refused with the reason.
  absl::string_view only_value = {};
  // kNoOp only: a no-op only when this Conveyor flag has this value once every flag is
  // parsed ("--position-embedding-type rope"); refused with the reason otherwise.
  absl::string_view only_with = {};
};

// Every group, in the order of the table.
absl::Span<const MegatronFlagGroup> MegatronFlagGroups();

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_MEGATRON_FLAG_TABLE_H_
