#include "trainer/input_fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "data/blend.h"
#include "parallel/group.h"
#include "parallel/string_gather.h"
#include "trainer/config/config_agreement.h"
#include "trainer/file_digest.h"
#include "trainer/hf/hf_folder.h"

namespace conveyor {
namespace {

RankInput Input(std::string what, std::string path, const absl::StatusOr<std::string>& contents) {
  return {std::move(what), std::move(path),
          contents.ok() ? *contents : DescribeUnreadable(contents.status())};
}

void AddDatasets(const google::protobuf::RepeatedPtrField<std::string>& words,
                 absl::string_view flag, std::vector<RankInput>* out) {
  if (words.empty()) return;
  const absl::StatusOr<Blend> blend =
      ParseBlend(std::vector<std::string>(words.begin(), words.end()), flag);
  if (!blend.ok()) return;  // refused by validation, naming the flag
  const size_t n = blend->prefixes.size();
  for (size_t k = 0; k < n; ++k) {
    const std::string& prefix = blend->prefixes[k];
    const std::string what = absl::StrFormat("%s dataset %d of %d", flag, k + 1, n);
    out->push_back(Input(absl::StrCat(what, " (.idx)"), prefix + ".idx",
                         DescribeDatasetIndex(prefix + ".idx")));
    // The tokens are sampled: a dataset is never read whole twice.
    out->push_back(Input(absl::StrCat(what, " (.bin)"), prefix + ".bin",
                         DescribeFileContents(prefix + ".bin", 0)));
  }
}

void AddTokenizerFiles(const DataConfig& data, std::vector<RankInput>* out) {
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string*>{"--vocab-file", &data.vocab_file()},
        {"--merge-file", &data.merge_file()}}) {
    if (!path->empty()) out->push_back(Input(flag, *path, DescribeFileContents(*path)));
  }
  const std::string& model = data.tokenizer_model();
  if (model.empty()) return;
  std::error_code ec;
  if (!std::filesystem::is_directory(model, ec)) {
    out->push_back(Input("--tokenizer-model", model, DescribeFileContents(model)));
    return;
  }
  // A Hugging Face folder: the two files the tokenizer reads (hf_tokenizer.h).
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    const std::string path = absl::StrCat(model, "/", name);
    out->push_back(
        Input(absl::StrCat("--tokenizer-model ", name), path, DescribeFileContents(path)));
  }
}

void AddHfWeights(const std::string& dir, std::vector<RankInput>* out) {
  if (dir.empty()) return;
  const absl::StatusOr<HfWeightFileMap> files = HfWeightFilesOf(dir);
  if (!files.ok()) {
    out->push_back(Input("--load-hf weights", dir, files.status()));
    return;
  }
  if (files->size() > 1 || !files->begin()->second.empty()) {  // shards: the index too
    const std::string index = absl::StrCat(dir, "/", kHfIndexFile);
    out->push_back(
        Input(absl::StrCat("--load-hf ", kHfIndexFile), index, DescribeFileContents(index)));
  }
  for (const auto& [path, tensors] : *files) {
    const std::string name = std::filesystem::path(path).filename().string();
    out->push_back(Input(absl::StrCat("--load-hf ", name), path, DescribeSafetensorsFile(path)));
  }
}

// Fields separated by '\0', which no path, name or description holds.
std::string Serialized(const std::vector<RankInput>& inputs) {
  std::vector<absl::string_view> fields;
  for (const RankInput& in : inputs) fields.insert(fields.end(), {in.what, in.path, in.contents});
  return absl::StrJoin(fields, std::string(1, '\0'));
}

std::vector<RankInput> Parsed(const std::string& serialized) {
  std::vector<RankInput> inputs;
  if (serialized.empty()) return inputs;
  const std::vector<std::string> f = absl::StrSplit(serialized, '\0');
  for (size_t i = 0; i + 2 < f.size(); i += 3) inputs.push_back({f[i], f[i + 1], f[i + 2]});
  return inputs;
}

// "2048 bytes, CRC32C 1a2b3c4d on ranks 0-2 (rank 0 reads a/x.bin), 4096 bytes, ... on
// rank 3 (rank 3 reads b/x.bin)": one entry per distinct contents, in the order of
// each one's first rank. `per_rank[r]` is null where rank r does not read it.
std::string DescribeDifference(const std::vector<const RankInput*>& per_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < int(per_rank.size()); ++r) {
    const std::string contents = per_rank[r] != nullptr ? per_rank[r]->contents : "not read";
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == contents; });
    if (same == groups.end()) same = groups.insert(groups.end(), {contents, {}});
    same->second.push_back(r);
  }
  constexpr size_t kShown = 4;
  std::vector<std::string> parts;
  for (size_t i = 0; i < groups.size() && i < kShown; ++i) {
    const auto& [contents, ranks] = groups[i];
    const RankInput* first = per_rank[ranks.front()];
    parts.push_back(absl::StrFormat(
        "%s on rank%s %s%s", contents, ranks.size() > 1 ? "s" : "", FormatRanks(ranks),
        first == nullptr ? ""
                         : absl::StrFormat(" (rank %d reads %s)", ranks.front(), first->path)));
  }
  if (groups.size() > kShown) parts.push_back(absl::StrCat(groups.size() - kShown, " more"));
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::vector<RankInput> InputsOf(const Config& config) {
  std::vector<RankInput> inputs;
  const DataConfig& data = config.data();
  if (!data.mock_data()) {
    AddDatasets(data.data_path(), "--data-path", &inputs);
    AddDatasets(data.train_data_path(), "--train-data-path", &inputs);
    AddDatasets(data.valid_data_path(), "--valid-data-path", &inputs);
    AddDatasets(data.test_data_path(), "--test-data-path", &inputs);
  }
  AddTokenizerFiles(data, &inputs);
  AddHfWeights(config.checkpoint().load_hf(), &inputs);
  return inputs;
}

absl::Status AgreeOnInputs(const std::vector<RankInput>& mine, Communicator& world) {
  std::string compared;  // the contents, without the paths
  for (const RankInput& in : mine) absl::StrAppend(&compared, in.what, "\t", in.contents, "\n");
  ASSIGN_OR_RETURN(const std::vector<std::string> fingerprints,
                   AllGatherStrings(world, TextFingerprint(compared)));
  if (std::all_of(fingerprints.begin(), fingerprints.end(),
                  [&](const std::string& f) { return f == fingerprints[0]; })) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> everyone,
                   AllGatherStrings(world, Serialized(mine)));
  std::vector<std::map<std::string, RankInput>> tables;
  std::vector<std::string> order;  // each input once, in the order of the first rank's
  for (const std::string& serialized : everyone) {
    tables.emplace_back();
    for (RankInput& in : Parsed(serialized)) {
      const std::string what = in.what;
      if (std::find(order.begin(), order.end(), what) == order.end()) order.push_back(what);
      tables.back()[what] = std::move(in);
    }
  }
  std::vector<std::string> differences;
  for (const std::string& what : order) {
    std::vector<const RankInput*> per_rank;
    for (const auto& table : tables) {
      const auto it = table.find(what);
      per_rank.push_back(it == table.end() ? nullptr : &it->second);
    }
    const bool same = std::all_of(per_rank.begin(), per_rank.end(), [&](const RankInput* in) {
      return in != nullptr && in->contents == per_rank[0]->contents;
    });
    if (!same) differences.push_back(absl::StrCat(what, ": ", DescribeDifference(per_rank)));
  }
  if (differences.empty()) return absl::OkStatus();  // the same inputs, listed apart
  return absl::FailedPreconditionError(absl::StrFormat(
      "stopping before training: the ranks read different files, and would train apart: %s. "
      "Every rank must read the same bytes, whatever the path: give every node the same copy "
      "(or put the files on storage every node shares) and replace the copies of the ranks "
      "that differ; nothing was trained or changed",
      absl::StrJoin(differences, "; ")));
}

absl::Status AgreeOnConfigAndInputs(const Config& config, Communicator& world) {
  RETURN_IF_ERROR(AgreeOnConfig(config, world));
  return AgreeOnInputs(InputsOf(config), world);
}

}  // namespace conveyor
