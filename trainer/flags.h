// Command-line flags of Conveyor, derived from proto/config.proto by reflection
// (docs/design.md §1): every leaf field of a group message of conveyor.Config is
// one flag, named like Megatron-LM's (num_layers <-> --num-layers). There is no
// hand-written flag table, so adding a field to the proto adds its flag.
#ifndef CONVEYOR_TRAINER_FLAGS_H_
#define CONVEYOR_TRAINER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "proto/config.pb.h"

namespace conveyor {

// One settable field of Config: the group field (e.g. Config.model) and the
// setting inside that group (e.g. ModelConfig.num_layers).
struct FlagField {
  const google::protobuf::FieldDescriptor* group;
  const google::protobuf::FieldDescriptor* field;
};

// Every settable field of Config, in declaration order (groups, then fields).
const std::vector<FlagField>& AllFlagFields();

// Flag name of a field: "--" + field name with '_' -> '-'.
std::string FlagName(const google::protobuf::FieldDescriptor& field);

// The values a string field accepts, from its (choices) option; empty when the
// field is unconstrained. An empty string can be one of the choices.
std::vector<std::string> FieldChoices(const google::protobuf::FieldDescriptor& field);

// Choices for messages: "LayerNorm, RMSNorm", with an empty choice shown as "".
std::string DescribeChoices(const std::vector<std::string>& choices);

// Parses args (argv without argv[0]) in order into a Config that starts from the
// proto defaults. "--config FILE.textproto" merges a text-format Config file at that
// point (fields set in the file overwrite); later flags win. --help and -h are
// skipped (see WantsHelp). Reports every problem at once in one
// InvalidArgumentError, one problem per line, each naming the flag.
absl::StatusOr<Config> ParseFlags(const std::vector<std::string>& args);

// True when args contain --help or -h.
bool WantsHelp(const std::vector<std::string>& args);

// --help text: every flag grouped under its group_title, each with type/choices,
// default and help text. Also documents --config and --help.
std::string FlagHelp();

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_FLAGS_H_
