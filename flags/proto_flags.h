// Command-line flags derived from a proto message by reflection (docs/design.md §1),
// shared by the trainer (conveyor.Config, whose fields are group messages) and the
// tools (a flat options message, proto/tools.proto). Field num_layers is flag
// --num-layers; its (help) option is the help text and, for a string, (choices)
// lists the accepted values. Parsing takes "--flag value" and "--flag=value";
// a boolean alone sets true; a list takes every value up to the next flag.
#ifndef CONVEYOR_FLAGS_PROTO_FLAGS_H_
#define CONVEYOR_FLAGS_PROTO_FLAGS_H_

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace conveyor {

// One settable field: the group field holding it (e.g. Config.model), or null for a
// flat message, and the setting itself (e.g. ModelConfig.num_layers).
struct FlagField {
  const google::protobuf::FieldDescriptor* group;
  const google::protobuf::FieldDescriptor* field;
};

// The flags of a root message, in declaration order. grouped: the root holds group
// messages whose fields are the flags (other root fields are skipped); otherwise
// every field of the root is a flag, but a message field stands for the fields of its
// message that its (flag_fields) option names.
std::vector<FlagField> CollectFlagFields(const google::protobuf::Descriptor& root, bool grouped);

// Flag name of a field: "--" + field name with '_' -> '-'.
std::string FlagName(const google::protobuf::FieldDescriptor& field);

// The values a string field accepts, from its (choices) option; empty when the
// field is unconstrained. An empty string can be one of the choices.
std::vector<std::string> FieldChoices(const google::protobuf::FieldDescriptor& field);

// Choices for messages: "LayerNorm, RMSNorm", with an empty choice shown as "".
std::string DescribeChoices(const std::vector<std::string>& choices);

// True when args contain --help or -h.
bool WantsHelp(const std::vector<std::string>& args);

// How one program's command line is read.
struct FlagSpec {
  std::vector<FlagField> fields;
  // For a flag that is not among `fields`: the whole message when the program knows
  // the flag (e.g. a Megatron flag with no counterpart), else nullopt and the
  // parser suggests the nearest flag whose words the flag misspells. `arg` is the
  // flag as given; `wanted` is its "--dashed-name" spelling.
  std::function<std::optional<std::string>(const std::string& arg, const std::string& wanted)>
      unknown_flag;
  // Names the program answers other than `fields` (the trainer's Megatron flags that
  // are no-ops or refused), offered in "did you mean" as well.
  std::vector<std::string> other_names;
  // A flag that takes a file merged into the root at its place (the trainer's
  // --config), or empty; merge_file gets the path and appends its problems.
  std::string file_flag;
  std::string file_value_name;  // e.g. "FILE.textproto", for the missing-value message
  std::function<void(const std::string& path, google::protobuf::Message* root,
                     std::vector<std::string>* problems)>
      merge_file;
};

// Parses args (argv without argv[0]) in order into *root (which keeps what it
// holds: start from the proto defaults); later flags win. --help and -h are
// skipped (see WantsHelp). Returns every problem, one per entry, each naming the
// flag; *root holds what could be parsed. `given`, when set, receives each field
// set by a flag.
std::vector<std::string> ParseFlagsInto(
    const FlagSpec& spec, const std::vector<std::string>& args, google::protobuf::Message* root,
    std::set<const google::protobuf::FieldDescriptor*>* given = nullptr);

// --help pieces: "INT", "{a|b}", "[=true|false]", "STRING ..."; the default as shown.
std::string FlagTypeText(const google::protobuf::FieldDescriptor& field);
std::string FlagDefaultText(const google::protobuf::FieldDescriptor& field);

// Appends one --help entry: "  --flag TYPE  (default: D)" and the wrapped help text.
void AppendHelpEntry(absl::string_view flag_and_type, absl::string_view default_text,
                     absl::string_view help_text, std::string* out);

// Appends the entry of one field, from its (help) option.
void AppendFieldHelp(const google::protobuf::FieldDescriptor& field, std::string* out);

}  // namespace conveyor

#endif  // CONVEYOR_FLAGS_PROTO_FLAGS_H_
