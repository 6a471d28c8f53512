#include "trainer/flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
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
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "trainer/megatron_flags_not_here.h"

namespace conveyor {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr char kConfigFlag[] = "--config";

const FlagField* FindFlag(const std::string& flag_name) {
  static const auto* const by_name = [] {
    auto* flags = new std::map<std::string, FlagField>();
    for (const FlagField& f : AllFlagFields()) (*flags)[FlagName(*f.field)] = f;
    return flags;
  }();
  auto it = by_name->find(flag_name);
  return it == by_name->end() ? nullptr : &it->second;
}

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

std::string UnknownFlagMessage(const std::string& arg_name) {
  // Users often type Megatron's Python attribute names or a single dash, so
  // compare the spelling they meant: dashes, not underscores or a single '-'.
  std::string wanted = absl::StrReplaceAll(arg_name, {{"_", "-"}});
  while (absl::StartsWith(wanted, "-")) wanted.erase(0, 1);
  wanted = "--" + wanted;
  if (const std::optional<std::string> why = MegatronFlagNotHere(wanted)) {
    return absl::StrCat("Megatron's ", arg_name, " has no counterpart here: ", *why);
  }
  std::vector<std::string> candidates = {kConfigFlag, "--help"};
  for (const FlagField& f : AllFlagFields()) candidates.push_back(FlagName(*f.field));
  const std::string* best = nullptr;
  int best_distance = std::numeric_limits<int>::max();
  for (const std::string& candidate : candidates) {
    const int d = EditDistance(wanted, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = &candidate;
    }
  }
  // About one typo per three letters of the name itself (without "--").
  const int tolerance = std::max<int>(1, (static_cast<int>(wanted.size()) - 2) / 3);
  if (best != nullptr && best_distance <= tolerance) {
    return absl::StrCat("unknown flag ", arg_name, ": did you mean ", *best, "?");
  }
  return absl::StrCat("unknown flag ", arg_name, ": see --help for the list of flags");
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

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    // The parser counts from 0; editors count from 1.
    errors_.push_back(absl::StrCat(line + 1, ":", column + 1, ": ", message));
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

void MergeConfigFile(const std::string& path, Config* config, std::vector<std::string>* problems) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    problems->push_back(
        absl::StrCat(kConfigFlag, " ", path, ": is a directory, expected a .textproto file"));
    return;
  }
  std::ifstream in(path);
  if (!in) {
    problems->push_back(absl::StrCat(kConfigFlag, " ", path, ": cannot read the file (",
                                     std::strerror(errno), ")"));
    return;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    problems->push_back(absl::StrCat(kConfigFlag, " ", path, ": error while reading the file"));
    return;
  }
  Config file;
  CollectErrors errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &file)) {
    std::vector<std::string> located;
    for (const std::string& e : errors.errors()) located.push_back(absl::StrCat(path, ":", e));
    if (located.empty()) located.push_back(absl::StrCat(path, ": not a text-format Config"));
    problems->push_back(absl::StrCat(kConfigFlag, " ", absl::StrJoin(located, "; ")));
    return;
  }
  // A list in the file replaces the list set before it, as a repeated flag does;
  // MergeFrom alone would append.
  const Reflection& cr = *config->GetReflection();
  for (const FlagField& f : AllFlagFields()) {
    if (!f.field->is_repeated() || !file.GetReflection()->HasField(file, f.group)) continue;
    const Message& file_group = file.GetReflection()->GetMessage(file, f.group);
    if (file_group.GetReflection()->FieldSize(file_group, f.field) == 0) continue;
    Message* group = cr.MutableMessage(config, f.group);
    group->GetReflection()->ClearField(group, f.field);
  }
  config->MergeFrom(file);
}

bool IsBoolText(absl::string_view s) { return s == "true" || s == "false" || s == "1" || s == "0"; }

std::string TypeText(const FieldDescriptor& field) {
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

std::string DefaultText(const FieldDescriptor& field) {
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

void AppendHelpEntry(absl::string_view flag_and_type, absl::string_view default_text,
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

// One pass over the arguments, in order, into a Config that starts from the proto
// defaults; every problem is collected, so that one run reports them all.
class CommandLine {
 public:
  explicit CommandLine(const std::vector<std::string>& args) : args_(args) {}

  absl::StatusOr<Config> Parse() {
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
      if (name == kConfigFlag) {
        ConfigFile(inline_value);
      } else {
        previous_bool = Flag(name, inline_value);
      }
    }
    if (!problems_.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems_, "\n"));
    return config_;
  }

 private:
  // Values never start with "--"; a single dash is fine ("-1", "-3e-4").
  bool IsValue(size_t j) const { return j < args_.size() && !absl::StartsWith(args_[j], "--"); }

  void StrayArgument(const std::string& arg, const FieldDescriptor* bool_before) {
    if (bool_before != nullptr && IsBoolText(arg)) {
      problems_.push_back(absl::StrCat(
          "unexpected argument '", arg, "' after ", FlagName(*bool_before),
          ": a boolean flag takes its value after '=', as in ", FlagName(*bool_before), "=", arg));
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
      problems_.push_back(absl::StrCat(kConfigFlag, " is missing its value: pass ", kConfigFlag,
                                       " FILE.textproto"));
      return;
    }
    MergeConfigFile(path, &config_, &problems_);
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
    Message* group = config_.GetReflection()->MutableMessage(&config_, flag->group);
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
          absl::StrCat(name, " is missing its value: pass ", name, " ", TypeText(field)));
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

  const std::vector<std::string>& args_;
  size_t i_ = 0;
  Config config_;  // proto2 defaults
  std::vector<std::string> problems_;
};

}  // namespace

const std::vector<FlagField>& AllFlagFields() {
  static const auto* const fields = [] {
    auto* all = new std::vector<FlagField>();
    const Descriptor& config = *Config::descriptor();
    for (int g = 0; g < config.field_count(); ++g) {
      const FieldDescriptor* group = config.field(g);
      // Config holds only group messages (proto/config.proto); a test checks it.
      if (group->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
      for (int f = 0; f < group->message_type()->field_count(); ++f) {
        all->push_back({group, group->message_type()->field(f)});
      }
    }
    return all;
  }();
  return *fields;
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

absl::StatusOr<Config> ParseFlags(const std::vector<std::string>& args) {
  CommandLine line(args);
  return line.Parse();
}

bool WantsHelp(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

std::string FlagHelp() {
  std::string out =
      "Usage: conveyor [--config FILE.textproto] [--flag VALUE | --flag=VALUE]...\n"
      "\n"
      "Flags keep Megatron-LM's names and are applied in order: later flags win.\n"
      "Boolean flags: --flag sets true, --flag=false clears. List flags take every value\n"
      "up to the next flag (--data-path 0.3 a 0.7 b) and replace the previous list.\n"
      "\n"
      "general:\n";
  AppendHelpEntry("--config FILE.textproto", "",
                  "Merge a text-format conveyor.Config file at this point, e.g. "
                  "'model { num_layers: 4 }'. Fields set in the file overwrite earlier "
                  "flags; later flags overwrite the file.",
                  &out);
  AppendHelpEntry("--help, -h", "", "Print this help and exit.", &out);
  const FieldDescriptor* current_group = nullptr;
  for (const FlagField& f : AllFlagFields()) {
    if (f.group != current_group) {
      current_group = f.group;
      const auto& options = f.group->message_type()->options();
      const std::string title =
          options.HasExtension(group_title) ? options.GetExtension(group_title) : f.group->name();
      absl::StrAppend(&out, "\n", title, ":\n");
    }
    AppendHelpEntry(absl::StrCat(FlagName(*f.field), " ", TypeText(*f.field)),
                    DefaultText(*f.field), f.field->options().GetExtension(help), &out);
  }
  return out;
}

}  // namespace conveyor
