#include "trainer/config/config_agreement.h"

#include <cstdint>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "data/blend.h"
#include "google/protobuf/text_format.h"
#include "parallel/string_gather.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

// Settings a rank may hold on its own (see the header).
const absl::flat_hash_set<std::string>& PerRankSettings() {
  static const auto* settings =
      new absl::flat_hash_set<std::string>{"load",         "load_hf",    "data_cache_path",
                                           "vocab_file",   "merge_file", "tokenizer_model",
                                           "metrics_file", "trace_file", "cuda_synchronize_each_op",
                                           "dry_run"};
  return *settings;
}

// Dataset lists whose prefixes are a rank's own view of the files: only how many
// datasets there are and their weights are settings.
const absl::flat_hash_set<std::string>& DatasetListSettings() {
  static const auto* settings = new absl::flat_hash_set<std::string>{
      "data_path", "train_data_path", "valid_data_path", "test_data_path"};
  return *settings;
}

// "2 datasets, weights [0.3, 0.7]" for --data-path 0.3 a 0.7 b; the list as given when
// it does not parse (validation names the fault).
std::string DatasetListText(const Message& group, const FieldDescriptor& field,
                            const std::string& as_given) {
  const Reflection& reflection = *group.GetReflection();
  std::vector<std::string> words;
  for (int i = 0; i < reflection.FieldSize(group, &field); ++i) {
    words.push_back(reflection.GetRepeatedString(group, &field, i));
  }
  if (words.empty()) return as_given;
  const absl::StatusOr<Blend> blend = ParseBlend(words, FlagName(field));
  if (!blend.ok()) return as_given;
  std::string text =
      absl::StrCat(blend->prefixes.size(), " dataset", blend->prefixes.size() == 1 ? "" : "s");
  if (blend->weighted()) {
    absl::StrAppend(&text, ", weights [", absl::StrJoin(blend->weights, ", "), "]");
  }
  return text;
}

std::string ValueText(const Message& group, const FieldDescriptor& field) {
  const Reflection& reflection = *group.GetReflection();
  if (!field.is_repeated()) {
    std::string text;
    TextFormat::PrintFieldValueToString(group, &field, -1, &text);
    return text;
  }
  std::vector<std::string> items(reflection.FieldSize(group, &field));
  for (size_t i = 0; i < items.size(); ++i) {
    TextFormat::PrintFieldValueToString(group, &field, static_cast<int>(i), &items[i]);
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

// "0-2, 5" for ranks {0, 1, 2, 5}.
std::string RankRanges(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ", ");
}

// "--lr 0.001 on ranks 0-2, 0.002 on rank 3" from every rank's value of one flag.
std::string DescribeDifference(const std::string& flag, const std::vector<std::string>& values) {
  std::map<std::string, std::vector<int>> ranks_by_value;
  for (size_t r = 0; r < values.size(); ++r) ranks_by_value[values[r]].push_back(r);
  // Listed from the value rank 0 holds on, in the order of their first rank.
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [value, ranks] : ranks_by_value) order.push_back({ranks.front(), value});
  std::sort(order.begin(), order.end());
  constexpr size_t kShown = 4;
  std::vector<std::string> parts;
  for (size_t i = 0; i < order.size() && i < kShown; ++i) {
    const std::vector<int>& ranks = ranks_by_value[order[i].second];
    parts.push_back(absl::StrFormat("%s on rank%s %s", order[i].second, ranks.size() > 1 ? "s" : "",
                                    RankRanges(ranks)));
  }
  if (order.size() > kShown) parts.push_back(absl::StrCat(order.size() - kShown, " more values"));
  return absl::StrCat(flag, " ", absl::StrJoin(parts, ", "));
}

}  // namespace

std::string TextFingerprint(absl::string_view text) {
  uint64_t hash = 14695981039346656037ull;  // 64-bit FNV-1a
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", hash);
}

std::vector<std::pair<std::string, std::string>> SettingsEveryRankShares(const Config& config) {
  std::vector<std::pair<std::string, std::string>> settings;
  const Reflection& reflection = *config.GetReflection();
  for (const FlagField& f : AllFlagFields()) {
    if (PerRankSettings().contains(f.field->name())) continue;
    const Message& group = reflection.GetMessage(config, f.group);
    std::string value = ValueText(group, *f.field);
    if (DatasetListSettings().contains(f.field->name())) {
      value = DatasetListText(group, *f.field, value);
    }
    settings.push_back({FlagName(*f.field), std::move(value)});
  }
  return settings;
}

absl::Status AgreeOnConfig(const Config& config, Communicator& world) {
  const std::vector<std::pair<std::string, std::string>> settings = SettingsEveryRankShares(config);
  std::string all_fingerprints, whole;
  for (const auto& [flag, value] : settings) {
    // The flag's name separates values, so that no two settings' texts run together.
    absl::StrAppend(&whole, flag, "=", value, "\n");
    absl::StrAppend(&all_fingerprints, TextFingerprint(value));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> wholes,
                   AllGatherStrings(world, TextFingerprint(whole)));
  if (std::all_of(wholes.begin(), wholes.end(),
                  [&](const std::string& w) { return w == wholes[0]; })) {
    return absl::OkStatus();
  }
  // Which settings differ: every rank compares every rank's fingerprint of each.
  ASSIGN_OR_RETURN(const std::vector<std::string> per_setting,
                   AllGatherStrings(world, all_fingerprints));
  constexpr size_t kWidth = 16;
  for (size_t r = 0; r < per_setting.size(); ++r) {
    if (per_setting[r].size() != all_fingerprints.size()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "rank %d runs a trainer with %d settings, rank %d one with %d: every rank must run "
          "the same build of the trainer",
          r, per_setting[r].size() / kWidth, world.rank(), settings.size()));
    }
  }
  std::vector<size_t> differing;
  for (size_t i = 0; i < settings.size(); ++i) {
    for (const std::string& theirs : per_setting) {
      if (theirs.compare(i * kWidth, kWidth, all_fingerprints, i * kWidth, kWidth) != 0) {
        differing.push_back(i);
        break;
      }
    }
  }
  // Their values, to name them. A value never holds '\0' (flags come from argv).
  std::vector<std::string> mine;
  for (size_t i : differing) mine.push_back(settings[i].second);
  ASSIGN_OR_RETURN(const std::vector<std::string> theirs,
                   AllGatherStrings(world, absl::StrJoin(mine, std::string(1, '\0'))));
  std::vector<std::string> descriptions;
  for (size_t k = 0; k < differing.size(); ++k) {
    std::vector<std::string> values;
    for (const std::string& rank_values : theirs) {
      const std::vector<std::string> split = absl::StrSplit(rank_values, '\0');
      values.push_back(k < split.size() ? split[k] : "");
    }
    descriptions.push_back(DescribeDifference(settings[differing[k]].first, values));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "the ranks were started with different settings: %s. Every rank must be given the same "
      "flags and --config file; check the launch script of the ranks that differ",
      absl::StrJoin(descriptions, "; ")));
}

}  // namespace conveyor
