#include "flags/proto_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "proto/config.pb.h"

namespace conveyor {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Levenshtein distance, for "did you mean" suggestions.
int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Whether `wanted` is `flag` misspelt, so that suggesting `flag` suggests what was
// meant: the same words (between dashes), each with about one typo per three letters
// ("--hiden-size", "--seq-lenght"), or the same letters with other dashes and at most
// one typo ("--numlayers"). A word more, less or replaced is another meaning
// ("--mtp-num-layers" is not "--num-layers", "--moe-router-dtype" not
// "--moe-router-topk"), however close the spelling.
bool SameWordsMisspelt(absl::string_view wanted, absl::string_view flag) {
  const std::vector<absl::string_view> a = absl::StrSplit(wanted, '-', absl::SkipEmpty());
  const std::vector<absl::string_view> b = absl::StrSplit(flag, '-', absl::SkipEmpty());
  if (a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (EditDistance(a[i], b[i]) > std::max<int>(1, static_cast<int>(b[i].size()) / 3)) {
        return false;
      }
    }
    return true;
  }
  return EditDistance(absl::StrJoin(a, ""), absl::StrJoin(b, "")) <= 1;
}

// Strict integer syntax: optional sign, then digits only ("1.5", "12abc", " 1" fail).
bool IsIntegerText(absl::string_view text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); });
}

// "-1", "-0.5", "-1e-3": an argument that is a (negative) value, not a flag.
bool IsNumberText(const std::string& text) {
  double unused;
  return absl::SimpleAtod(text, &unused);
}

absl::Status WrongType(absl::string_view flag, absl::string_view expected, absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " expects ", expected, ", got '", text, "'"));
}

absl::Status ParseInteger(absl::string_view flag, const std::string& text, int64_t min,
                          uint64_t max, absl::string_view type_name, int64_t* signed_out,
                          uint64_t* unsigned_out) {
  const bool is_unsigned = unsigned_out != nullptr;
  const bool negative = absl::StartsWith(text, "-");
  if (!IsIntegerText(text) || (is_unsigned && negative && text != "-0")) {
    return WrongType(flag, is_unsigned ? "a non-negative integer" : "an integer", text);
  }
  bool in_range;
  if (is_unsigned) {
    in_range = absl::SimpleAtoi(text, unsigned_out) && *unsigned_out <= max;
  } else {
    in_range = absl::SimpleAtoi(text, signed_out) && *signed_out >= min &&
               (*signed_out < 0 || static_cast<uint64_t>(*signed_out) <= max);
  }
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", text, " is out of range for ",
                                                   type_name, " [", min, ", ", max, "]"));
  }
  return absl::OkStatus();
}

absl::Status ParseReal(absl::string_view flag, const std::string& text, bool is_float,
                       double* out) {
  if (text.empty() || absl::ascii_isspace(text.front()) || absl::ascii_isspace(text.back()) ||
      !absl::SimpleAtod(text, out)) {
    return WrongType(flag, "a number", text);
  }
  if (!std::isfinite(*out)) return WrongType(flag, "a finite number", text);
  if (is_float && std::fabs(*out) > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", text, " is out of range for float"));
  }
  return absl::OkStatus();
}

// SetFromText's cases, one per kind of field: parse `text` and set the field (or
// append to it, for a list).
absl::Status SetSigned(const FieldDescriptor& field, const std::string& text, Message* group) {
  const Reflection& r = *group->GetReflection();
  const bool add = field.is_repeated();
  const bool is32 = field.cpp_type() == FieldDescriptor::CPPTYPE_INT32;
  int64_t v = 0;
  const absl::Status s =
      is32 ? ParseInteger(FlagName(field), text, std::numeric_limits<int32_t>::min(),
                          std::numeric_limits<int32_t>::max(), "int32", &v, nullptr)
           : ParseInteger(FlagName(field), text, std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max(), "int64", &v, nullptr);
  if (!s.ok()) return s;
  if (is32) {
    add ? r.AddInt32(group, &field, static_cast<int32_t>(v))
        : r.SetInt32(group, &field, static_cast<int32_t>(v));
  } else {
    add ? r.AddInt64(group, &field, v) : r.SetInt64(group, &field, v);
  }
  return absl::OkStatus();
}

absl::Status SetUnsigned(const FieldDescriptor& field, const std::string& text, Message* group) {
  const Reflection& r = *group->GetReflection();
  const bool add = field.is_repeated();
  const bool is32 = field.cpp_type() == FieldDescriptor::CPPTYPE_UINT32;
  uint64_t v = 0;
  const absl::Status s = ParseInteger(
      FlagName(field), text, 0,
      is32 ? std::numeric_limits<uint32_t>::max() : std::numeric_limits<uint64_t>::max(),
      is32 ? "uint32" : "uint64", nullptr, &v);
  if (!s.ok()) return s;
  if (is32) {
    add ? r.AddUInt32(group, &field, static_cast<uint32_t>(v))
        : r.SetUInt32(group, &field, static_cast<uint32_t>(v));
  } else {
    add ? r.AddUInt64(group, &field, v) : r.SetUInt64(group, &field, v);
  }
  return absl::OkStatus();
}

absl::Status SetReal(const FieldDescriptor& field, const std::string& text, Message* group) {
  const Reflection& r = *group->GetReflection();
  const bool add = field.is_repeated();
  const bool is_float = field.cpp_type() == FieldDescriptor::CPPTYPE_FLOAT;
  double v = 0;
  const absl::Status s = ParseReal(FlagName(field), text, is_float, &v);
  if (!s.ok()) return s;
  if (is_float) {
    add ? r.AddFloat(group, &field, static_cast<float>(v))
        : r.SetFloat(group, &field, static_cast<float>(v));
  } else {
    add ? r.AddDouble(group, &field, v) : r.SetDouble(group, &field, v);
  }
  return absl::OkStatus();
}

absl::Status SetBool(const FieldDescriptor& field, const std::string& text, Message* group) {
  bool v;
  if (text == "true" || text == "1") {
    v = true;
  } else if (text == "false" || text == "0") {
    v = false;
  } else {
    return WrongType(FlagName(field), "true, false, 1 or 0", text);
  }
  const Reflection& r = *group->GetReflection();
  field.is_repeated() ? r.AddBool(group, &field, v) : r.SetBool(group, &field, v);
  return absl::OkStatus();
}

absl::Status SetEnum(const FieldDescriptor& field, const std::string& text, Message* group) {
  const EnumValueDescriptor* v = field.enum_type()->FindValueByName(text);
  if (v == nullptr) {
    std::vector<std::string> names;
    for (int i = 0; i < field.enum_type()->value_count(); ++i) {
      names.push_back(field.enum_type()->value(i)->name());
    }
    return WrongType(FlagName(field), absl::StrCat("one of ", DescribeChoices(names)), text);
  }
  const Reflection& r = *group->GetReflection();
  field.is_repeated() ? r.AddEnum(group, &field, v) : r.SetEnum(group, &field, v);
  return absl::OkStatus();
}

absl::Status SetString(const FieldDescriptor& field, const std::string& text, Message* group) {
  const std::vector<std::string> choices = FieldChoices(field);
  if (!choices.empty() && std::find(choices.begin(), choices.end(), text) == choices.end()) {
    return WrongType(FlagName(field), absl::StrCat("one of ", DescribeChoices(choices)), text);
  }
  const Reflection& r = *group->GetReflection();
  field.is_repeated() ? r.AddString(group, &field, text) : r.SetString(group, &field, text);
  return absl::OkStatus();
}

// Parses text as the field's type and sets it (or appends it, for a list).
absl::Status SetFromText(const FieldDescriptor& field, const std::string& text, Message* group) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
      return SetSigned(field, text, group);
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return SetUnsigned(field, text, group);
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return SetReal(field, text, group);
    case FieldDescriptor::CPPTYPE_BOOL:
      return SetBool(field, text, group);
    case FieldDescriptor::CPPTYPE_ENUM:
      return SetEnum(field, text, group);
    case FieldDescriptor::CPPTYPE_STRING:
      return SetString(field, text, group);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      FlagName(field), " cannot be set from the command line (message field); use --config"));
}

bool IsBoolText(absl::string_view s) { return s == "true" || s == "false" || s == "1" || s == "0"; }

std::string TypeTextImpl(const FieldDescriptor& field) {
  std::string type;
  const std::vector<std::string> choices = FieldChoices(field);
  if (!choices.empty()) {
    std::vector<std::string> shown;
    for (const std::string& c : choices) shown.push_back(c.empty() ? "\"\"" : c);
    type = absl::StrCat("{", absl::StrJoin(shown, "|"), "}");
  } else {
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        type = "INT";
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        type = "FLOAT";
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        return "[=true|false]";
      case FieldDescriptor::CPPTYPE_ENUM: {
        std::vector<std::string> names;
        for (int i = 0; i < field.enum_type()->value_count(); ++i) {
          names.push_back(field.enum_type()->value(i)->name());
        }
        type = absl::StrCat("{", absl::StrJoin(names, "|"), "}");
        break;
      }
      default:
        type = "STRING";
    }
  }
  return field.is_repeated() ? absl::StrCat(type, " ...") : type;
}

std::string DefaultTextImpl(const FieldDescriptor& field) {
  if (field.is_repeated()) return "none";
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(field.default_value_int32());
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(field.default_value_int64());
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(field.default_value_uint32());
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(field.default_value_uint64());
    case FieldDescriptor::CPPTYPE_FLOAT:
      return absl::StrCat(field.default_value_float());
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrCat(field.default_value_double());
    case FieldDescriptor::CPPTYPE_BOOL:
      return field.default_value_bool() ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return field.default_value_enum()->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return field.default_value_string().empty() ? "\"\"" : field.default_value_string();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

void AppendHelpEntryImpl(absl::string_view flag_and_type, absl::string_view default_text,
                     absl::string_view help, std::string* out) {
  absl::StrAppend(out, "  ", flag_and_type);
  if (!default_text.empty()) absl::StrAppend(out, "  (default: ", default_text, ")");
  // Wrap at 88 columns so long help stays readable in a terminal.
  constexpr size_t kWidth = 88;
  std::string line = "     ";
  for (absl::string_view word : absl::StrSplit(help, ' ', absl::SkipEmpty())) {
    if (line.size() > 5 && line.size() + 1 + word.size() > kWidth) {
      absl::StrAppend(out, "\n", line);
      line = "     ";
    }
    absl::StrAppend(&line, " ", word);
  }
  absl::StrAppend(out, "\n", line, "\n");
}

class CommandLine {
 public:
  CommandLine(const FlagSpec& spec, const std::vector<std::string>& args, Message* root,
              std::set<const FieldDescriptor*>* given)
      : spec_(spec), args_(args), root_(root), given_(given) {
    for (const FlagField& f : spec_.fields) by_name_[FlagName(*f.field)] = f;
  }

  std::vector<std::string> Parse() {
    const FieldDescriptor* previous_bool = nullptr;  // for "--swiglu false" hints
    for (i_ = 0; i_ < args_.size(); ++i_) {
      const std::string& arg = args_[i_];
      const FieldDescriptor* bool_before = previous_bool;
      previous_bool = nullptr;
      if (arg == "--help" || arg == "-h") continue;
      if (!absl::StartsWith(arg, "-") || IsNumberText(arg) || arg == "-") {
        StrayArgument(arg, bool_before);
        continue;
      }
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(0, eq);
      std::optional<std::string> inline_value;
      if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
      if (!spec_.file_flag.empty() && name == spec_.file_flag) {
        ConfigFile(inline_value);
      } else {
        previous_bool = Flag(name, inline_value);
      }
    }
    return problems_;
  }

 private:
  // Values never start with "--"; a single dash is fine ("-1", "-3e-4").
  bool IsValue(size_t j) const { return j < args_.size() && !absl::StartsWith(args_[j], "--"); }

  void StrayArgument(const std::string& arg, const FieldDescriptor* bool_before) {
    if (bool_before != nullptr && IsBoolText(arg)) {
      const std::string flag = FlagName(*bool_before);
      problems_.push_back(absl::StrCat("unexpected argument '", arg, "' after ", flag, ": ", flag,
                                       " is a switch, given alone as in Megatron (", flag, "=",
                                       arg, " sets it here)"));
    } else {
      problems_.push_back(absl::StrCat("unexpected argument '", arg,
                                       "': a value must follow its flag, as in --flag value"));
    }
  }

  void ConfigFile(const std::optional<std::string>& inline_value) {
    std::string path;
    if (inline_value.has_value()) {
      path = *inline_value;
    } else if (IsValue(i_ + 1)) {
      path = args_[++i_];
    } else {
      problems_.push_back(absl::StrCat(spec_.file_flag, " is missing its value: pass ",
                                       spec_.file_flag, " ", spec_.file_value_name));
      return;
    }
    spec_.merge_file(path, root_, &problems_);
  }

  // Applies one flag and its values; returns the field when it is a boolean set
  // without a value (for the hint a following "false" gets).
  const FieldDescriptor* Flag(const std::string& name,
                              const std::optional<std::string>& inline_value) {
    const FlagField* flag = absl::StartsWith(name, "--") ? FindFlag(name) : nullptr;
    if (flag == nullptr) {
      problems_.push_back(UnknownFlagMessage(name));
      // Its values would otherwise be reported again as stray arguments.
      if (!inline_value.has_value()) {
        while (IsValue(i_ + 1)) ++i_;
      }
      return nullptr;
    }
    const FieldDescriptor& field = *flag->field;
    Message* group = flag->group == nullptr
                         ? root_
                         : root_->GetReflection()->MutableMessage(root_, flag->group);
    if (given_ != nullptr) given_->insert(&field);
    if (field.is_repeated()) {
      List(field, inline_value, group);
      return nullptr;
    }
    if (field.cpp_type() == FieldDescriptor::CPPTYPE_BOOL && !inline_value.has_value()) {
      group->GetReflection()->SetBool(group, &field, true);
      return &field;
    }
    std::string value;
    if (inline_value.has_value()) {
      value = *inline_value;
    } else if (IsValue(i_ + 1)) {
      value = args_[++i_];
    } else {
      problems_.push_back(
          absl::StrCat(name, " is missing its value: pass ", name, " ", TypeTextImpl(field)));
      return nullptr;
    }
    Report(SetFromText(field, value, group));
    return nullptr;
  }

  // Megatron's nargs='*': every value up to the next flag; each occurrence replaces
  // the list (an empty one clears it, e.g. a list from --config).
  void List(const FieldDescriptor& field, const std::optional<std::string>& inline_value,
            Message* group) {
    std::vector<std::string> values;
    if (inline_value.has_value()) {
      values.push_back(*inline_value);
    } else {
      while (IsValue(i_ + 1)) values.push_back(args_[++i_]);
    }
    group->GetReflection()->ClearField(group, &field);
    for (const std::string& v : values) Report(SetFromText(field, v, group));
  }

  void Report(const absl::Status& s) {
    if (!s.ok()) problems_.push_back(std::string(s.message()));
  }

  const FlagField* FindFlag(const std::string& flag_name) const {
    auto it = by_name_.find(flag_name);
    return it == by_name_.end() ? nullptr : &it->second;
  }

  std::string UnknownFlagMessage(const std::string& arg_name) const {
    // Users often type Megatron's Python attribute names or a single dash, so
    // compare the spelling they meant: dashes, not underscores or a single '-'.
    std::string wanted = absl::StrReplaceAll(arg_name, {{"_", "-"}});
    while (absl::StartsWith(wanted, "-")) wanted.erase(0, 1);
    wanted = "--" + wanted;
    if (spec_.unknown_flag) {
      if (std::optional<std::string> known = spec_.unknown_flag(arg_name, wanted)) return *known;
    }
    std::vector<std::string> candidates = spec_.other_names;
    if (!spec_.file_flag.empty()) candidates.push_back(spec_.file_flag);
    candidates.push_back("--help");
    for (const FlagField& f : spec_.fields) candidates.push_back(FlagName(*f.field));
    const std::string* best = nullptr;
    int best_distance = std::numeric_limits<int>::max();
    for (const std::string& candidate : candidates) {
      const int d = EditDistance(wanted, candidate);
      if (d < best_distance && SameWordsMisspelt(wanted, candidate)) {
        best_distance = d;
        best = &candidate;
      }
    }
    if (best != nullptr) {
      return absl::StrCat("unknown flag ", arg_name, ": did you mean ", *best, "?");
    }
    return absl::StrCat("unknown flag ", arg_name, ": see --help for the list of flags");
  }

  const FlagSpec& spec_;
  const std::vector<std::string>& args_;
  Message* root_;
  std::set<const FieldDescriptor*>* given_;
  std::map<std::string, FlagField> by_name_;
  size_t i_ = 0;
  std::vector<std::string> problems_;
};

// One field of a flat options message: itself, or, for a message field, the fields of
// that message its (flag_fields) option names, in that order (a name that is not a
// field of the message is left out; flags_test checks the tools' messages have none).
void AppendFlatFlagFields(const FieldDescriptor* field, std::vector<FlagField>* all) {
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
    all->push_back({nullptr, field});
    return;
  }
  for (absl::string_view name :
       absl::StrSplit(field->options().GetExtension(flag_fields), ',', absl::SkipEmpty())) {
    const FieldDescriptor* flag = field->message_type()->FindFieldByName(std::string(name));
    if (flag != nullptr) all->push_back({field, flag});
  }
}

}  // namespace

std::vector<FlagField> CollectFlagFields(const Descriptor& root, bool grouped) {
  std::vector<FlagField> all;
  for (int g = 0; g < root.field_count(); ++g) {
    const FieldDescriptor* field = root.field(g);
    if (!grouped) {
      AppendFlatFlagFields(field, &all);
      continue;
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    for (int f = 0; f < field->message_type()->field_count(); ++f) {
      all.push_back({field, field->message_type()->field(f)});
    }
  }
  return all;
}

std::string FlagName(const FieldDescriptor& field) {
  return absl::StrCat("--", absl::StrReplaceAll(field.name(), {{"_", "-"}}));
}

std::vector<std::string> FieldChoices(const FieldDescriptor& field) {
  if (!field.options().HasExtension(choices)) return {};
  return absl::StrSplit(field.options().GetExtension(choices), ',');
}

std::string DescribeChoices(const std::vector<std::string>& values) {
  std::vector<std::string> shown;
  for (const std::string& v : values) shown.push_back(v.empty() ? "\"\"" : v);
  return absl::StrJoin(shown, ", ");
}

bool WantsHelp(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

std::vector<std::string> ParseFlagsInto(const FlagSpec& spec, const std::vector<std::string>& args,
                                        Message* root, std::set<const FieldDescriptor*>* given) {
  CommandLine line(spec, args, root, given);
  return line.Parse();
}

std::string FlagTypeText(const FieldDescriptor& field) { return TypeTextImpl(field); }

std::string FlagDefaultText(const FieldDescriptor& field) { return DefaultTextImpl(field); }

void AppendHelpEntry(absl::string_view flag_and_type, absl::string_view default_text,
                     absl::string_view help_text, std::string* out) {
  AppendHelpEntryImpl(flag_and_type, default_text, help_text, out);
}

void AppendFieldHelp(const FieldDescriptor& field, std::string* out) {
  AppendHelpEntry(absl::StrCat(FlagName(field), " ", FlagTypeText(field)), FlagDefaultText(field),
                  field.options().GetExtension(help), out);
}

}  // namespace conveyor
