#include "trainer/config/megatron_flags_not_here.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "trainer/config/megatron_flag_table.h"

namespace conveyor {
namespace {

using Values = MegatronFlagEntry::Values;

// The table indexed by flag name, and its prefixes ("--grpo-*"), built once.
struct TableIndex {
  std::map<std::string, MegatronFlagEntry, std::less<>> by_name;
  std::vector<std::pair<std::string, const MegatronFlagGroup*>> prefixes;
};

const TableIndex& Index() {
  static const auto* index = [] {
    auto* built = new TableIndex();
    for (const MegatronFlagGroup& group : MegatronFlagGroups()) {
      for (absl::string_view token : absl::StrSplit(group.flags, ' ', absl::SkipEmpty())) {
        if (absl::EndsWith(token, "*")) {
          built->prefixes.emplace_back(token.substr(0, token.size() - 1), &group);
          continue;
        }
        const std::vector<absl::string_view> parts = absl::StrSplit(token, '=');
        Values values = Values::kNone;
        if (parts.size() > 1) values = absl::EndsWith(parts[1], "...") ? Values::kSome : Values::kOne;
        if (group.answer == MegatronAnswer::kRefused) values = Values::kUnstated;
        built->by_name[std::string(parts[0])] = {&group, values};
      }
    }
    return built;
  }();
  return *index;
}

// "--flag_name=v" -> "--flag-name": the spelling the table uses.
std::string DashedName(absl::string_view arg) {
  const size_t eq = arg.find('=');
  const absl::string_view name = arg.substr(2, eq == absl::string_view::npos ? arg.npos : eq - 2);
  return absl::StrCat("--", absl::StrReplaceAll(name, {{"_", "-"}}));
}

bool SameValue(absl::string_view given, absl::string_view wanted) {
  if (given == wanted) return true;
  char* end = nullptr;
  const std::string text(given);
  const double number = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && number == std::strtod(wanted.data(), nullptr);
}

// Values never start with "--"; a single dash is fine ("-1").
bool IsValue(const std::vector<std::string>& args, size_t j) {
  return j < args.size() && !absl::StartsWith(args[j], "--");
}

// Walks argv once, filling a MegatronFlagSplit.
class Splitter {
 public:
  Splitter(const std::vector<std::string>& args,
           const std::function<ConveyorFlag(absl::string_view)>& conveyor_flag)
      : args_(args), conveyor_flag_(conveyor_flag) {}

  MegatronFlagSplit Split() {
    for (i_ = 0; i_ < args_.size(); ++i_) {
      const std::string& arg = args_[i_];
      if (!absl::StartsWith(arg, "--") || arg == "--") {
        split_.kept.push_back(arg);
        continue;
      }
      const std::string name = DashedName(arg);
      const MegatronFlagEntry as_written = FindMegatronFlag(arg.substr(0, arg.find('=')));
      if (as_written.group != nullptr && as_written.group->answer == MegatronAnswer::kAlias) {
        Answer(arg, as_written);
        continue;
      }
      if (conveyor_flag_(name) != ConveyorFlag::kUnknown) {
        split_.kept.push_back(arg);
        continue;
      }
      const MegatronFlagEntry entry = FindMegatronFlag(name);
      if (entry.group != nullptr) {
        Answer(arg, entry);
      } else if (absl::StartsWith(name, "--no-") && arg.find('=') == std::string::npos &&
                 conveyor_flag_(absl::StrCat("--", name.substr(5))) == ConveyorFlag::kSwitch) {
        // Megatron's store_false spelling of a switch Conveyor has.
        split_.kept.push_back(absl::StrCat("--", name.substr(5), "=false"));
      } else {
        split_.kept.push_back(arg);  // the parser says it is unknown
      }
    }
    for (const auto& [group, used] : refused_) {
      split_.problems.push_back(absl::StrCat(absl::StrJoin(used, ", "), ": ", group->reason));
    }
    split_.kept.insert(split_.kept.end(), aliases_.begin(), aliases_.end());
    return std::move(split_);
  }

 private:
  void Answer(const std::string& arg, const MegatronFlagEntry& entry) {
    const MegatronFlagGroup& group = *entry.group;
    const std::string as_typed = arg.substr(0, arg.find('='));
    std::optional<std::vector<std::string>> values = TakeValues(arg, entry.values);
    if (!values.has_value()) return;  // a problem was reported
    const std::string given =
        values->empty() ? as_typed : absl::StrCat(as_typed, " ", absl::StrJoin(*values, " "));
    switch (group.answer) {
      case MegatronAnswer::kRefused:
        Refuse(group, as_typed);
        return;
      case MegatronAnswer::kAlias:
        for (absl::string_view word : absl::StrSplit(group.reason, ' ')) {
          aliases_.emplace_back(word);
        }
        aliases_.insert(aliases_.end(), values->begin(), values->end());
        return;
      case MegatronAnswer::kNoOp:
        if (!group.only_value.empty() &&
            !(values->size() == 1 && SameValue(values->front(), group.only_value))) {
          Refuse(group, absl::StrCat(given, " (a no-op at ", group.only_value, " only)"));
          return;
        }
        split_.ignored.push_back(given);
        return;
    }
  }

  // The flag's values as Megatron takes them, advancing past them; nullopt, with a
  // problem that shows Megatron's form, when they do not fit it.
  std::optional<std::vector<std::string>> TakeValues(const std::string& arg, Values wanted) {
    const std::string name = DashedName(arg);
    const size_t eq = arg.find('=');
    std::vector<std::string> values;
    if (eq != std::string::npos) values.push_back(arg.substr(eq + 1));
    if (wanted == Values::kNone) {
      if (!values.empty() || IsValue(args_, i_ + 1)) {
        const std::string& word = values.empty() ? args_[++i_] : values.front();
        split_.problems.push_back(absl::StrCat("unexpected value '", word, "' of ", name,
                                               ": Megatron's ", name,
                                               " is a switch, given alone"));
        return std::nullopt;
      }
      return values;
    }
    const bool several = wanted != Values::kOne;
    while (values.empty() || (several && eq == std::string::npos)) {
      if (!IsValue(args_, i_ + 1)) break;
      values.push_back(args_[++i_]);
    }
    if (values.empty() && wanted != Values::kUnstated) {
      split_.problems.push_back(absl::StrCat(name, " is missing its value: Megatron's form is ",
                                             name, several ? " VALUE [VALUE ...]" : " VALUE"));
      return std::nullopt;
    }
    return values;
  }

  void Refuse(const MegatronFlagGroup& group, const std::string& flag) {
    for (auto& [known, used] : refused_) {
      if (known == &group) {
        used.push_back(flag);
        return;
      }
    }
    refused_.push_back({&group, {flag}});
  }

  const std::vector<std::string>& args_;
  const std::function<ConveyorFlag(absl::string_view)>& conveyor_flag_;
  size_t i_ = 0;
  MegatronFlagSplit split_;
  std::vector<std::string> aliases_;
  // In the order each group was first used.
  std::vector<std::pair<const MegatronFlagGroup*, std::vector<std::string>>> refused_;
};

const MegatronFlagGroup* GroupOf(const std::string& ignored) {
  return FindMegatronFlag(DashedName(ignored.substr(0, ignored.find(' ')))).group;
}

}  // namespace

MegatronFlagEntry FindMegatronFlag(absl::string_view flag) {
  const TableIndex& index = Index();
  if (const auto it = index.by_name.find(flag); it != index.by_name.end()) return it->second;
  for (const auto& [prefix, group] : index.prefixes) {
    if (absl::StartsWith(flag, prefix)) return {group, Values::kUnstated};
  }
  return {};
}

std::vector<std::string> MegatronFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : Index().by_name) names.push_back(name);
  return names;
}

MegatronFlagSplit SplitMegatronFlags(
    const std::vector<std::string>& args,
    const std::function<ConveyorFlag(absl::string_view)>& conveyor_flag) {
  return Splitter(args, conveyor_flag).Split();
}

std::vector<std::string> MegatronConditionProblems(
    const std::vector<std::string>& ignored,
    const std::function<std::string(absl::string_view)>& value_of) {
  std::vector<std::string> problems;
  for (const std::string& given : ignored) {
    const MegatronFlagGroup* group = GroupOf(given);
    if (group == nullptr || group->only_with.empty()) continue;
    const std::vector<absl::string_view> wanted = absl::StrSplit(group->only_with, ' ');
    const std::string value = value_of(wanted[0]);
    if (value == wanted[1]) continue;
    problems.push_back(
        absl::StrCat(given, " with ", wanted[0], " ", value, ": ", group->reason));
  }
  return problems;
}

std::vector<std::string> MegatronNoOpWarnings(const std::vector<std::string>& ignored) {
  std::vector<std::pair<const MegatronFlagGroup*, std::vector<std::string>>> groups;
  for (const std::string& given : ignored) {
    const MegatronFlagGroup* group = GroupOf(given);
    auto it = groups.begin();
    while (it != groups.end() && it->first != group) ++it;
    if (it == groups.end()) it = groups.insert(it, {group, {}});
    it->second.push_back(given);
  }
  std::vector<std::string> lines;
  for (const auto& [group, flags] : groups) {
    lines.push_back(absl::StrCat("warning: Megatron's ", absl::StrJoin(flags, ", "),
                                 flags.size() == 1 ? " changes" : " change",
                                 " nothing here: ", group->reason));
  }
  return lines;
}

}  // namespace conveyor
