#include "trainer/config/flags.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "flags/proto_flags.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "trainer/config/megatron_flags_not_here.h"

namespace conveyor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr char kConfigFlag[] = "--config";

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

// The Conveyor flag spelt "--name", or null.
const FlagField* FindFlagField(absl::string_view name) {
  static const auto* const by_name = [] {
    auto* map = new std::map<std::string, FlagField, std::less<>>();
    for (const FlagField& f : AllFlagFields()) (*map)[FlagName(*f.field)] = f;
    return map;
  }();
  const auto it = by_name->find(name);
  return it == by_name->end() ? nullptr : &it->second;
}

// A scalar flag's value in `config`, as text-format prints it ("rope", "4", "true").
std::string FlagValueText(const Config& config, const FlagField& f) {
  const Message& group = config.GetReflection()->GetMessage(config, f.group);
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(group, f.field, -1, &text);
  if (text.size() >= 2 && text.front() == '"') text = text.substr(1, text.size() - 2);
  return text;
}

}  // namespace

const std::vector<FlagField>& AllFlagFields() {
  // Config holds only group messages (proto/config.proto); a test checks it.
  static const auto* const fields =
      new std::vector<FlagField>(CollectFlagFields(*Config::descriptor(), /*grouped=*/true));
  return *fields;
}

absl::StatusOr<Config> ParseFlags(const std::vector<std::string>& args,
                                  std::vector<std::string>* ignored_megatron_flags) {
  static const auto* const spec = [] {
    auto* sp = new FlagSpec();
    sp->fields = AllFlagFields();
    sp->other_names = MegatronFlagNames();
    sp->file_flag = kConfigFlag;
    sp->file_value_name = "FILE.textproto";
    sp->merge_file = [](const std::string& path, Message* root,
                        std::vector<std::string>* problems) {
      MergeConfigFile(path, static_cast<Config*>(root), problems);
    };
    return sp;
  }();
  MegatronFlagSplit split = SplitMegatronFlags(args, [](absl::string_view name) {
    const FlagField* f = FindFlagField(name);
    if (f == nullptr) return name == kConfigFlag ? ConveyorFlag::kValued : ConveyorFlag::kUnknown;
    const bool is_switch =
        f->field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL && !f->field->is_repeated();
    return is_switch ? ConveyorFlag::kSwitch : ConveyorFlag::kValued;
  });
  Config config;  // proto2 defaults
  std::vector<std::string> problems = std::move(split.problems);
  for (std::string& p : ParseFlagsInto(*spec, split.kept, &config)) problems.push_back(std::move(p));
  if (problems.empty()) {
    problems = MegatronConditionProblems(split.ignored, [&config](absl::string_view name) {
      const FlagField* f = FindFlagField(name);
      return f == nullptr ? std::string() : FlagValueText(config, *f);
    });
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  if (ignored_megatron_flags != nullptr) *ignored_megatron_flags = std::move(split.ignored);
  return config;
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
    AppendFieldHelp(*f.field, &out);
  }
  return out;
}

}  // namespace conveyor
