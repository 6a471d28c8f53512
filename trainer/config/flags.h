// Command-line flags of Conveyor, derived from proto/config.proto by reflection
// (docs/design.md §1): every leaf field of a group message of conveyor.Config is
// one flag, named like Megatron-LM's (num_layers <-> --num-layers). There is no
// hand-written flag table, so adding a field to the proto adds its flag.
#ifndef CONVEYOR_TRAINER_CONFIG_FLAGS_H_
#define CONVEYOR_TRAINER_CONFIG_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flags/proto_flags.h"
#include "google/protobuf/descriptor.h"
#include "proto/config.pb.h"

namespace conveyor {

// Every settable field of Config (FlagField, from flags/proto_flags.h, which also
// declares FlagName, FieldChoices, DescribeChoices and WantsHelp), in declaration
// order (groups, then fields).
const std::vector<FlagField>& AllFlagFields();

// Parses args (argv without argv[0]) in order into a Config that starts from the
// proto defaults. "--config FILE.textproto" merges a text-format Config file at that
// point (fields set in the file overwrite); later flags win. --help and -h are
// skipped (see WantsHelp). Reports every problem at once in one
// InvalidArgumentError, one problem per line, each naming the flag. Megatron flags
// that change nothing here are dropped (trainer/config/megatron_flags_not_here.h) and, when
// `ignored_megatron_flags` is set, listed there as given.
absl::StatusOr<Config> ParseFlags(const std::vector<std::string>& args,
                                  std::vector<std::string>* ignored_megatron_flags = nullptr);

// --help text: every flag grouped under its group_title, each with type/choices,
// default and help text. Also documents --config and --help.
std::string FlagHelp();

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_FLAGS_H_
