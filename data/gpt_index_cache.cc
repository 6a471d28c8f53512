#include "data/gpt_index_cache.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "data/mapped_file.h"
#include "data/md5.h"
#include "data/npy_file.h"

namespace conveyor {
namespace {

std::string JsonString(absl::string_view s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

std::string JsonBool(bool b) { return b ? "true" : "false"; }

bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool AllExist(const GptIndexCacheFiles& f) {
  return FileExists(f.description) && FileExists(f.document_index) && FileExists(f.sample_index) &&
         FileExists(f.shuffle_index);
}

absl::StatusOr<std::vector<int64_t>> LoadNpy(const std::string& path, int rank) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(NpyArray a, DecodeNpy(absl::string_view(file->data(), file->size()), path));
  if (int(a.shape.size()) != rank) {
    return absl::DataLossError(
        absl::StrCat(path, ": expected a ", rank, "-D array, found ", a.shape.size(), "-D"));
  }
  return std::move(a.values);
}

absl::StatusOr<GptIndices> LoadIndices(absl::Span<const int32_t> sequence_lengths,
                                       absl::Span<const int32_t> documents, const GptIndexKey& key,
                                       const GptIndexCacheFiles& files) {
  ASSIGN_OR_RETURN(GptEpochPlan plan, PlanGptEpochs(sequence_lengths, documents, key.config));
  // Every problem with a cached file names it; the cache is rank 0's to
  // rewrite, so the fix is to delete the set and let the next run rebuild it.
  auto damaged = [&](const std::string& file, const absl::Status& st) {
    return absl::DataLossError(absl::StrCat("cached indices ", files.description, ": ", file,
                                            " is damaged: ", st.message(), "; delete the four ",
                                            absl::StripSuffix(files.description, "description.txt"),
                                            "* files and rerun to rebuild them"));
  };
  GptIndices out;
  out.tokens_per_epoch = plan.tokens_per_epoch;
  out.num_epochs = plan.num_epochs;
  out.separate_final_epoch = plan.separate_final_epoch;
  absl::StatusOr<std::vector<int64_t>> doc = LoadNpy(files.document_index, 1);
  if (!doc.ok()) return damaged(files.document_index, doc.status());
  if (absl::Status st = ValidateDocumentIndex(documents, plan, *doc); !st.ok()) {
    return damaged(files.document_index, st);
  }
  out.document_index.assign(doc->begin(), doc->end());  // in range: they are documents
  doc->clear();
  doc->shrink_to_fit();
  absl::StatusOr<std::vector<int64_t>> sample = LoadNpy(files.sample_index, 2);
  if (!sample.ok()) return damaged(files.sample_index, sample.status());
  if (absl::Status st =
          ValidateSampleIndex(sequence_lengths, out.document_index, plan, key.config, *sample);
      !st.ok()) {
    return damaged(files.sample_index, st);
  }
  out.sample_index = *std::move(sample);
  absl::StatusOr<std::vector<int64_t>> shuffle = LoadNpy(files.shuffle_index, 1);
  if (!shuffle.ok()) return damaged(files.shuffle_index, shuffle.status());
  if (absl::Status st = ValidateShuffleIndex(plan, *shuffle); !st.ok()) {
    return damaged(files.shuffle_index, st);
  }
  out.shuffle_index = *std::move(shuffle);
  return out;
}

absl::Status WriteIndices(const GptIndices& indices, const std::string& description,
                          const GptIndexCacheFiles& files) {
  // Megatron's dtypes: int32 document index; int32 sample index unless a
  // value needs more; uint32 shuffle index below 2^32 - 1 samples.
  std::vector<int64_t> doc(indices.document_index.begin(), indices.document_index.end());
  int64_t sample_max = 0;
  for (int64_t v : indices.sample_index) sample_max = std::max(sample_max, v);
  const int64_t rows = int64_t(indices.sample_index.size() / 2);
  const int64_t samples = indices.num_samples();
  struct Item {
    const std::string* path;
    absl::StatusOr<std::string> bytes;
  };
  Item items[] = {
      {&files.document_index, EncodeNpy("<i4", {int64_t(doc.size())}, doc)},
      {&files.sample_index,
       EncodeNpy(sample_max <= std::numeric_limits<int32_t>::max() ? "<i4" : "<i8", {rows, 2},
                 indices.sample_index)},
      {&files.shuffle_index,
       EncodeNpy(samples < int64_t{std::numeric_limits<uint32_t>::max()} - 1 ? "<u4" : "<i8",
                 {samples}, indices.shuffle_index)},
      {&files.description, description},
  };
  for (Item& item : items) {  // description last: it marks the set complete
    RETURN_IF_ERROR(item.bytes.status());
    RETURN_IF_ERROR(WriteCacheFile(*item.path, *item.bytes));
  }
  return absl::OkStatus();
}

}  // namespace

std::string GptIndexDescription(const GptIndexKey& key) {
  std::string range = "null";
  if (key.split_range) {
    range = absl::StrFormat("[\n        %.17g,\n        %.17g\n    ]", key.split_range->first,
                            key.split_range->second);
  }
  const GptIndexConfig& c = key.config;
  return absl::StrCat(
      "{\n", "    \"class\": \"GPTDataset\",\n",
      "    \"dataset_path\": ", JsonString(key.dataset_path), ",\n",
      "    \"num_samples\": ", c.num_samples < 0 ? "null" : absl::StrCat(c.num_samples), ",\n",
      "    \"index_split\": ", JsonString(key.index_split), ",\n",
      "    \"random_seed\": ", c.random_seed, ",\n", "    \"sequence_length\": ", c.sequence_length,
      ",\n", "    \"split\": ", key.split.empty() ? "null" : JsonString(key.split), ",\n",
      "    \"split_range\": ", range, ",\n",
      "    \"add_extra_token_to_sequence\": ", JsonBool(c.add_extra_token_to_sequence), ",\n",
      "    \"drop_last_partial_sequence\": ", JsonBool(c.drop_last_partial_sequence), ",\n",
      "    \"num_sequences\": ", key.num_sequences, ",\n", "    \"num_tokens\": ", key.num_tokens,
      "\n", "}");
}

GptIndexCacheFiles CacheFilesFor(const std::string& cache_dir, const GptIndexKey& key) {
  const std::string base = absl::StrCat(cache_dir, "/", Md5Hex(GptIndexDescription(key)),
                                        "-GPTDataset-", key.index_split, "-");
  return {base + "description.txt", base + "document_index.npy", base + "sample_index.npy",
          base + "shuffle_index.npy"};
}

absl::Status WriteCacheFile(const std::string& path, const std::string& bytes) {
  return WriteFileAtomically(path, bytes, absl::StrCat(path, ".tmp.", ::getpid()),
                             Durability::kDurable);
}

absl::StatusOr<GptIndices> BuildOrLoadGptIndices(absl::Span<const int32_t> sequence_lengths,
                                                 absl::Span<const int32_t> documents,
                                                 const GptIndexKey& key,
                                                 const GptIndexCacheOptions& options) {
  if (options.path.empty()) return BuildGptIndices(sequence_lengths, documents, key.config);
  const GptIndexCacheFiles files = CacheFilesFor(options.path, key);
  if (AllExist(files)) return LoadIndices(sequence_lengths, documents, key, files);

  ASSIGN_OR_RETURN(GptIndices built, BuildGptIndices(sequence_lengths, documents, key.config));
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);
  if (ec) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("--data-cache-path ", options.path, ": cannot create the folder"));
  }
  RETURN_IF_ERROR(WriteIndices(built, GptIndexDescription(key), files)) << "--data-cache-path";
  return built;
}

}  // namespace conveyor
