#include "trainer/hf/hf_folder.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/hf/json_text.h"

namespace conveyor {
namespace {

// The shard file name transformers uses: model-00001-of-00003.safetensors.
std::string ShardName(size_t index, size_t count) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index + 1, count);
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  return WriteFileAtomically(path, text, path + ".tmp", Durability::kDurable);
}

absl::Status RemoveIfPresent(const std::string& path) {
  return PathExists(path) ? RemoveFile(path) : absl::OkStatus();
}

// Tensors in name order, cut into groups of at most `max_bytes` of data each.
std::vector<HfTensorMap> Shards(const HfTensorMap& tensors, int64_t max_bytes, HfDtype dtype) {
  std::vector<HfTensorMap> shards(1);
  int64_t bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    const int64_t size = int64_t(tensor.data.size()) * HfDtypeBytes(dtype);
    if (!shards.back().empty() && bytes + size > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back()[name] = tensor;
    bytes += size;
  }
  return shards;
}

absl::Status ReadFileTensors(const std::string& path, const std::set<std::string>* only,
                             const std::function<bool(const std::string&)>& skip,
                             HfTensorMap* out) {
  ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::Open(path));
  for (const auto& [name, entry] : file.entries()) {
    if (skip(name) || (only != nullptr && only->count(name) == 0)) continue;
    ASSIGN_OR_RETURN((*out)[name], file.Read(name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Json> ReadHfConfigJson(const std::string& dir) {
  const std::string path = JoinPath(dir, kHfConfigFile);
  ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(path));
  absl::StatusOr<Json> json = ParseJson(text);
  if (!json.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not valid JSON: ", json.status().message()));
  }
  return json;
}

absl::StatusOr<HfTensorMap> ReadHfWeights(const std::string& dir,
                                          const std::function<bool(const std::string&)>& skip) {
  HfTensorMap tensors;
  ASSIGN_OR_RETURN(const HfWeightFileMap files, HfWeightFilesOf(dir));
  const std::string index_path = JoinPath(dir, kHfIndexFile);
  for (const auto& [file, names] : files) {
    RETURN_IF_ERROR(ReadFileTensors(file, names.empty() ? nullptr : &names, skip, &tensors));
    for (const std::string& name : names) {
      if (tensors.count(name) == 0 && !skip(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, " maps ", name, " to ", file, ", which has no such tensor"));
      }
    }
  }
  return tensors;
}

absl::StatusOr<HfWeightFileMap> HfWeightFilesOf(const std::string& dir) {
  const std::string single = JoinPath(dir, kHfWeightsFile);
  if (PathExists(single)) return HfWeightFileMap{{single, {}}};
  const std::string index_path = JoinPath(dir, kHfIndexFile);
  if (!PathExists(index_path)) {
    return absl::NotFoundError(absl::StrCat(dir, " holds neither ", kHfWeightsFile, " nor ",
                                            kHfIndexFile, ": not a Hugging Face model folder"));
  }
  ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(index_path));
  const absl::StatusOr<Json> index = ParseJson(text);
  if (!index.ok() || !MemberOrNull(*index, "weight_map").is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, " is not an index: it needs a \"weight_map\" object"));
  }
  HfWeightFileMap by_file;  // shard -> its tensors
  for (const auto& [name, file] : MemberOrNull(*index, "weight_map").items()) {
    if (!file.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": the file of tensor ", name, " is not a string"));
    }
    by_file[JoinPath(dir, AsString(file))].insert(name);
  }
  return by_file;
}

absl::StatusOr<HfWeightFiles> WriteHfWeights(const std::string& dir, const HfTensorMap& tensors,
                                             int64_t max_shard_bytes, HfDtype dtype) {
  RETURN_IF_ERROR(MakeDirs(dir));
  // transformers refuses safetensors files without a "format" entry in the metadata.
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const std::vector<HfTensorMap> shards = Shards(tensors, max_shard_bytes, dtype);
  HfWeightFiles written;
  auto write = [&](const std::string& name, const HfTensorMap& shard) -> absl::Status {
    const std::string path = JoinPath(dir, name);
    RETURN_IF_ERROR(WriteSafetensors(path, shard, metadata, dtype));
    ASSIGN_OR_RETURN(const ReadableFile file, ReadableFile::Open(path));
    written.files.push_back(name);
    written.bytes += file.size();
    return absl::OkStatus();
  };
  if (shards.size() == 1) {
    RETURN_IF_ERROR(write(kHfWeightsFile, shards[0]));
    RETURN_IF_ERROR(RemoveIfPresent(JoinPath(dir, kHfIndexFile)));
    return written;
  }
  std::vector<std::string> map_lines;
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = ShardName(i, shards.size());
    RETURN_IF_ERROR(write(name, shards[i]));
    for (const auto& [tensor, value] : shards[i]) {
      map_lines.push_back(absl::StrCat("    ", JsonQuote(tensor), ": ", JsonQuote(name)));
      total += int64_t(value.data.size()) * HfDtypeBytes(dtype);
    }
  }
  // As transformers writes it: sorted keys, two-space indent; total_size counts data.
  RETURN_IF_ERROR(WriteText(JoinPath(dir, kHfIndexFile),
                            absl::StrCat("{\n  \"metadata\": {\n    \"total_size\": ", total,
                                         "\n  },\n  \"weight_map\": {\n",
                                         absl::StrJoin(map_lines, ",\n"), "\n  }\n}\n")));
  written.files.push_back(kHfIndexFile);
  RETURN_IF_ERROR(RemoveIfPresent(JoinPath(dir, kHfWeightsFile)));
  return written;
}

absl::StatusOr<std::vector<std::string>> CopyTokenizerFiles(const std::string& from,
                                                            const std::string& to) {
  std::vector<std::string> copied;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                           "special_tokens_map.json", "vocab.json", "merges.txt"}) {
    const std::string source = JoinPath(from, name);
    if (!PathExists(source)) continue;
    ASSIGN_OR_RETURN(const std::string contents, ReadSmallFile(source));
    RETURN_IF_ERROR(WriteText(JoinPath(to, name), contents));
    copied.push_back(name);
  }
  if (copied.empty()) {
    return absl::NotFoundError(absl::StrCat("--tokenizer-dir ", from,
                                            " holds no tokenizer file (tokenizer.json, "
                                            "tokenizer_config.json, tokenizer.model, "
                                            "special_tokens_map.json, vocab.json, merges.txt)"));
  }
  return copied;
}

}  // namespace conveyor
