#include "trainer/config/effective_config.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// A field's value as text, repeated fields as a space-separated list.
std::string ValueText(const Message& group, const FieldDescriptor& field) {
  const google::protobuf::Reflection& r = *group.GetReflection();
  google::protobuf::TextFormat::Printer printer;
  std::vector<std::string> values;
  const int count = field.is_repeated() ? r.FieldSize(group, &field) : 1;
  for (int i = 0; i < count; ++i) {
    std::string text;
    printer.PrintFieldValueToString(group, &field, field.is_repeated() ? i : -1, &text);
    values.push_back(text);
  }
  return values.empty() ? "[]" : absl::StrJoin(values, " ");
}

}  // namespace

std::string FormatEffectiveConfig(const Config& config) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const FlagField& f : AllFlagFields()) {
    const Message& group = config.GetReflection()->GetMessage(config, f.group);
    rows.emplace_back(f.field->name(), ValueText(group, *f.field));
  }
  std::sort(rows.begin(), rows.end());
  std::string out = "------------------------ arguments ------------------------\n";
  for (const auto& [name, value] : rows) {
    const size_t dots = name.size() < 46 ? 48 - name.size() : 2;
    out += "  " + name + " " + std::string(dots, '.') + " " + value + "\n";
  }
  out += "-------------------- end of arguments ---------------------\n";
  return out;
}

}  // namespace conveyor
