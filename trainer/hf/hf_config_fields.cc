#include "trainer/hf/hf_config_fields.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "trainer/hf/hf_config_table.h"
#include "trainer/hf/json_text.h"

namespace conveyor {
namespace {

// Whether `value` is an integer (64 or 64.0, not 64.5); IsInteger: one an int64 holds.
bool IsIntegral(const Json& value) {
  return value.is_number() && std::isfinite(AsDouble(value)) &&
         std::floor(AsDouble(value)) == AsDouble(value);
}
bool IsInteger(const Json& value) {
  return IsIntegral(value) && std::fabs(AsDouble(value)) < 9e18;
}

bool HasType(const Json& value, HfJsonType type) {
  switch (type) {
    case HfJsonType::kAny:
      return true;
    case HfJsonType::kInteger:
      return IsIntegral(value);
    case HfJsonType::kIntegerOrNull:
      return value.is_null() || IsIntegral(value);
    case HfJsonType::kNumber:
      return value.is_number() && std::isfinite(AsDouble(value));
    case HfJsonType::kBool:
      return value.is_boolean();
    case HfJsonType::kString:
      return value.is_string();
    case HfJsonType::kStringArray:
      return value.is_array() && std::all_of(value.begin(), value.end(),
                                             [](const Json& v) { return v.is_string(); });
    case HfJsonType::kObjectOrNull:
      return value.is_null() || value.is_object();
    case HfJsonType::kArrayOrNull:
      return value.is_null() || value.is_array();
  }
  return false;
}

const char* TypeName(HfJsonType type) {
  switch (type) {
    case HfJsonType::kAny:
      return "any value";
    case HfJsonType::kInteger:
      return "an integer";
    case HfJsonType::kIntegerOrNull:
      return "an integer or null";
    case HfJsonType::kNumber:
      return "a finite number";
    case HfJsonType::kBool:
      return "true or false";
    case HfJsonType::kString:
      return "a string";
    case HfJsonType::kStringArray:
      return "a list of strings";
    case HfJsonType::kObjectOrNull:
      return "an object or null";
    case HfJsonType::kArrayOrNull:
      return "a list or null";
  }
  return "";
}

// The problem with one present field, or "" when it is fine.
std::string FieldProblem(const HfConfigField& field, const Json& value) {
  const std::string shown = absl::StrCat(field.key, " = ", JsonValueText(value));
  if (!HasType(value, field.type)) {
    return absl::StrCat(shown, " has the wrong type: expected ", TypeName(field.type));
  }
  if (field.limit != nullptr && IsIntegral(value)) {
    if (AsDouble(value) < 1) return absl::StrCat(shown, " is not a size: it must be at least 1");
    // Beyond int64 is beyond every limit: shown as the int64 maximum would mislead.
    const int64_t size = IsInteger(value) ? AsInt64(value) : field.limit->max + 1;
    if (std::optional<std::string> problem =
            SizeLimitProblem(absl::StrCat(field.key, " ="), size, *field.limit)) {
      return IsInteger(value) ? *problem
                              : absl::StrCat(shown, " is more than ", field.limit->max,
                                             ", the largest Conveyor accepts");
    }
  }
  if (field.use == HfFieldUse::kRefusedUnlessAllowed &&
      std::find(field.allowed.begin(), field.allowed.end(), JsonValueText(value)) ==
          field.allowed.end()) {
    return absl::StrCat(shown, " is not supported: Conveyor supports ",
                        absl::StrJoin(field.allowed, " or "), " (", field.note, ")");
  }
  return "";
}

std::string ShortText(std::string text) {
  constexpr size_t kLongest = 60;
  if (text.size() > kLongest) text = text.substr(0, kLongest - 3) + "...";
  return text;
}

}  // namespace

const Json* FindWithAliases(const Json& hf, const HfArchitecture& arch,
                                 absl::string_view key) {
  if (const Json* value = FindMember(hf, key)) return value;
  for (const HfConfigField& field : HfConfigFields(arch)) {
    if (field.alias_of == key) {
      if (const Json* value = FindMember(hf, field.key)) return value;
    }
  }
  return nullptr;
}

Json HfFieldOrDefault(const Json& hf, const HfArchitecture& arch, absl::string_view key) {
  if (const Json* value = FindWithAliases(hf, arch, key)) return *value;
  const HfConfigField* field = FindHfConfigField(arch, key);
  if (field == nullptr || field->hf_default.empty()) return Json();
  absl::StatusOr<Json> parsed = ParseJson(field->hf_default);
  return parsed.ok() ? *parsed : Json();
}

const std::vector<HfConfigField>& HfConfigFields(const HfArchitecture& arch) {
  static const auto* tables = [] {
    auto* t = new std::map<std::string, std::vector<HfConfigField>>;
    for (const HfArchitecture& a : HfArchitectures()) {
      std::vector<HfConfigField> fields = HfFamilyFields(a.model_type);
      const std::vector<HfConfigField> common = HfCommonFields();
      fields.insert(fields.end(), common.begin(), common.end());
      (*t)[a.model_type] = std::move(fields);
    }
    return t;
  }();
  return tables->at(arch.model_type);
}

const HfConfigField* FindHfConfigField(const HfArchitecture& arch, absl::string_view key) {
  for (const HfConfigField& field : HfConfigFields(arch)) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

std::string JsonValueText(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return AsBool(value) ? "true" : "false";
  if (value.is_number()) {
    return IsInteger(value) ? absl::StrCat(AsInt64(value)) : absl::StrCat(AsDouble(value));
  }
  if (value.is_string()) return ShortText(JsonQuote(AsString(value)));
  std::vector<std::string> items;
  if (value.is_array()) {
    for (const Json& item : value) items.push_back(JsonValueText(item));
    return ShortText(absl::StrCat("[", absl::StrJoin(items, ", "), "]"));
  }
  for (const auto& [key, item] : value.items()) {
    items.push_back(absl::StrCat(JsonQuote(key), ": ", JsonValueText(item)));
  }
  return ShortText(absl::StrCat("{", absl::StrJoin(items, ", "), "}"));
}

absl::Status CheckHfConfigFields(const Json& hf, const std::string& path,
                                 const HfArchitecture& arch, std::vector<std::string>* warnings) {
  if (!hf.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a JSON object"));
  }
  std::vector<std::string> problems, unknown;
  for (const HfConfigField& field : HfConfigFields(arch)) {
    if (field.required && FindWithAliases(hf, arch, field.key) == nullptr) {
      problems.push_back(absl::StrCat(field.key, " is missing: a ", arch.class_name,
                                      " config must give it (", field.note, ")"));
    }
  }
  for (const auto& [key, value] : hf.items()) {
    const HfConfigField* field = FindHfConfigField(arch, key);
    if (field == nullptr) {
      unknown.push_back(key);
    } else if (std::string problem = FieldProblem(*field, value); !problem.empty()) {
      problems.push_back(std::move(problem));
    }
  }
  if (!unknown.empty() && warnings != nullptr) {
    warnings->push_back(absl::StrCat(
        "--load-hf: ", path, ": fields Conveyor does not know, not applied: ",
        absl::StrJoin(unknown, ", "), " (what each known field does: docs/hf_config_fields.md)"));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--load-hf: ", path, " cannot be imported:\n  ",
                                                 absl::StrJoin(problems, "\n  ")));
}

std::string HfConfigFieldsMarkdown() {
  std::string out = kHfConfigFieldsPreamble;
  auto table = [&](const std::vector<HfConfigField>& fields) {
    out += "\n| field | transformers' default | Conveyor | what and why |\n|---|---|---|---|\n";
    for (const HfConfigField& f : fields) {
      const std::string use =
          f.use == HfFieldUse::kHonoured ? "honoured"
          : f.use == HfFieldUse::kIgnored
              ? "ignored"
              : absl::StrCat("refused unless `", absl::StrJoin(f.allowed, "` or `"), "`");
      std::string note = f.note;
      if (f.limit != nullptr) absl::StrAppend(&note, "; at most ", f.limit->max);
      if (f.required) note += "; required";
      const std::string shown = f.hf_default.empty() ? "—" : absl::StrCat("`", f.hf_default, "`");
      absl::StrAppend(&out, "| `", f.key, "` | ", shown, " | ",
                      absl::StrReplaceAll(use, {{"|", "\\|"}}), " | ",
                      absl::StrReplaceAll(note, {{"|", "\\|"}}), " |\n");
    }
  };
  for (const HfArchitecture& a : HfArchitectures()) {
    absl::StrAppend(&out, "\n## ", a.class_name, " (model_type `", a.model_type, "`)\n");
    table(HfFamilyFields(a.model_type));
  }
  out += "\n## Every architecture\n\nThe fields every `PretrainedConfig` has, and metadata.\n";
  table(HfCommonFields());
  return out;
}

}  // namespace conveyor
