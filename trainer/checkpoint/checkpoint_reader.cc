#include "trainer/checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/crc32c.h"
#include "trainer/checkpoint/envelope.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/finite_values.h"
#include "trainer/checkpoint/format.h"
#include "trainer/checkpoint/megatron_folder.h"

namespace conveyor {
namespace {

// The iterations of committed checkpoints among a folder's `names`: folders named
// exactly iter_<digits>, ascending.
std::vector<int64_t> CommittedIterations(const std::vector<std::string>& names) {
  std::vector<int64_t> iterations;
  for (const std::string& name : names) {
    int64_t it;
    if (ParseIterationDirName(name, &it)) iterations.push_back(it);
  }
  std::sort(iterations.begin(), iterations.end());
  return iterations;
}

// Committed iterations in `load_dir`, for messages that suggest what does exist.
std::string DescribeAvailable(const std::string& load_dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(load_dir);
  if (!names.ok()) return absl::StrCat(load_dir, " cannot be listed");
  const std::vector<int64_t> iterations = CommittedIterations(*names);
  if (iterations.empty()) return absl::StrCat(load_dir, " holds no committed checkpoint");
  return absl::StrCat("committed iterations in ", load_dir, ": ", absl::StrJoin(iterations, ", "));
}

// The data files a load keeps open, by name.
class FileCache {
 public:
  explicit FileCache(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<const ReadableFile*> Get(const std::string& name) {
    auto it = files_.find(name);
    if (it == files_.end()) {
      ASSIGN_OR_RETURN(ReadableFile file, ReadableFile::Open(JoinPath(dir_, name)));
      it = files_.emplace(name, std::make_unique<ReadableFile>(std::move(file))).first;
    }
    return it->second.get();
  }

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<ReadableFile>> files_;
};

}  // namespace

absl::StatusOr<LoadedCheckpoint> OpenCheckpoint(const std::string& load_dir,
                                                std::optional<int64_t> iteration) {
  return LoadedCheckpoint::Open(load_dir, iteration);
}

absl::StatusOr<CheckpointFolderSurvey> SurveyCheckpointFolder(const std::string& load_dir) {
  CheckpointFolderSurvey survey;
  // Only a folder that is certainly absent counts as absent: one that cannot be read
  // (permissions, ...) may hold checkpoints.
  absl::StatusOr<std::vector<std::string>> names = ListDir(load_dir);
  if (absl::IsNotFound(names.status())) return survey;
  survey.exists = true;
  if (!names.ok()) {
    if (PathExists(load_dir) && !IsDirectory(load_dir)) {
      return absl::FailedPreconditionError(
          absl::StrCat(load_dir, " is a file, not a folder of checkpoints"));
    }
    return names.status();
  }
  if (const std::optional<std::string> megatron = DescribeMegatronCheckpoint(load_dir, *names)) {
    return absl::FailedPreconditionError(absl::StrCat(
        load_dir, " holds a checkpoint written by Megatron-LM (", *megatron,
        "), a format Conveyor neither reads nor writes: to train from its weights, convert it to "
        "a Hugging Face model folder (Megatron Bridge's export, "
        "examples/conversion/convert_checkpoints.py) and pass that folder to --load-hf"));
  }
  survey.has_latest_file = std::binary_search(names->begin(), names->end(), kLatestFileName);
  survey.committed_iterations = CommittedIterations(*names);
  return survey;
}

std::optional<int64_t> NewestOpenableIteration(const std::string& load_dir,
                                               const CheckpointFolderSurvey& survey,
                                               std::optional<int64_t> except, int max_tries) {
  const std::vector<int64_t>& committed = survey.committed_iterations;
  int tries = 0;
  for (auto it = committed.rbegin(); it != committed.rend() && tries < max_tries; ++it) {
    if (*it == except) continue;
    ++tries;
    if (OpenCheckpoint(load_dir, *it).ok()) return *it;
  }
  return std::nullopt;
}

absl::StatusOr<LoadedCheckpoint> LoadedCheckpoint::Open(const std::string& load_dir,
                                                        std::optional<int64_t> iteration) {
  const bool from_latest = !iteration.has_value();
  if (from_latest) {
    ASSIGN_OR_RETURN(iteration, ReadLatestIteration(load_dir));
  }
  LoadedCheckpoint ckpt;
  ckpt.directory_ = JoinPath(load_dir, IterationDirName(*iteration));
  if (!PathExists(ckpt.directory_)) {
    return absl::NotFoundError(absl::StrCat(
        "checkpoint of iteration ", *iteration, " not found: ", ckpt.directory_, " does not exist",
        from_latest ? absl::StrCat(" although ", kLatestFileName, " names it") : "", " (",
        DescribeAvailable(load_dir), ")"));
  }
  const std::string manifest_path = JoinPath(ckpt.directory_, kManifestFileName);
  const absl::Status read = ReadEnvelopeFile(manifest_path, &ckpt.manifest_);
  if (absl::IsNotFound(read)) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", ckpt.directory_, " has no ",
                                            kManifestFileName,
                                            " (not written by Conveyor, or damaged)"));
  }
  RETURN_IF_ERROR(read);
  const Manifest& m = ckpt.manifest_;
  if (m.format_version() > kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(manifest_path, " has format version ", m.format_version(),
                     ", newer than the version ", kCheckpointFormatVersion, " this build reads"));
  }
  if (m.format_version() < 1) {
    return absl::DataLossError(absl::StrCat(manifest_path, " has no format version"));
  }
  if (m.iteration() != *iteration) {
    return absl::DataLossError(absl::StrCat(manifest_path, " describes iteration ", m.iteration(),
                                            ", not ", *iteration, " as its folder name says"));
  }
  RETURN_IF_ERROR(ckpt.BuildIndex()) << manifest_path;
  RETURN_IF_ERROR(ckpt.CheckDataFiles());
  return ckpt;
}

absl::Status LoadedCheckpoint::BuildIndex() {
  for (int t = 0; t < manifest_.tensors_size(); ++t) {
    const TensorRecord& tensor = manifest_.tensors(t);
    if (tensor.dtype() != ELEMENT_FLOAT32) {
      return absl::UnimplementedError(absl::StrCat("tensor ", tensor.name(), " has dtype ",
                                                   ElementType_Name(tensor.dtype()),
                                                   "; this build reads ELEMENT_FLOAT32 only"));
    }
    for (const ShardRecord& shard : tensor.shards()) {
      // Names are relative to the folder: refuse anything that leaves it.
      if (shard.file().empty() || absl::StrContains(shard.file(), "/") || shard.file() == "." ||
          shard.file() == ".." || shard.byte_offset() < 0) {
        return absl::DataLossError(absl::StrCat("tensor ", tensor.name(),
                                                " has a shard with file name \"", shard.file(),
                                                "\" at byte offset ", shard.byte_offset()));
      }
    }
    absl::StatusOr<StoredTensorIndex> index = StoredTensorIndex::Build(tensor);
    if (!index.ok()) return absl::DataLossError(index.status().message());
    if (!tensors_.emplace(tensor.name(), Indexed{t, std::move(*index)}).second) {
      return absl::DataLossError(absl::StrCat("tensor ", tensor.name(), " is listed twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadedCheckpoint::CheckDataFiles() const {
  // Per file: the furthest byte a record needs, and that record's tensor.
  std::map<std::string, std::pair<int64_t, std::string>> needed;
  for (const TensorRecord& tensor : manifest_.tensors()) {
    for (const ShardRecord& shard : tensor.shards()) {
      auto& [end, name] = needed[shard.file()];
      if (shard.byte_offset() + shard.byte_length() >= end) {
        end = shard.byte_offset() + shard.byte_length();
        name = tensor.name();
      }
    }
  }
  for (const auto& [file, need] : needed) {
    const std::string path = JoinPath(directory_, file);
    absl::StatusOr<ReadableFile> opened = ReadableFile::Open(path);
    if (absl::IsNotFound(opened.status())) {
      return absl::NotFoundError(absl::StrCat("checkpoint data file ", path,
                                              " is missing (it holds shards of tensor ",
                                              need.second, " and others)"));
    }
    RETURN_IF_ERROR(opened.status());
    if (opened->size() < need.first) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint data file ", path, " is truncated: it has ", opened->size(),
          " bytes but the shard of tensor ", need.second, " ends at byte ", need.first));
    }
  }
  return absl::OkStatus();
}

CheckpointState LoadedCheckpoint::State(int rank) const {
  CheckpointState state;
  state.config = manifest_.config();
  state.iteration = manifest_.iteration();
  state.consumed_samples = manifest_.consumed_samples();
  state.data_position = manifest_.data_position();
  state.layout = manifest_.layout();
  state.optimizer_steps = manifest_.optimizer_steps();
  for (const RngState& rng : manifest_.rng_states()) {
    if (rng.rank() == rank) state.rng_states.push_back({rng.name(), rng.state()});
  }
  return state;
}

std::optional<LoadedCheckpoint::Entry> LoadedCheckpoint::Find(absl::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return Entry{&manifest_.tensors(it->second.tensor), &it->second.index};
}

const TensorRecord* LoadedCheckpoint::FindTensor(absl::string_view name) const {
  std::optional<Entry> entry = Find(name);
  return entry ? entry->record : nullptr;
}

std::vector<std::string> LoadedCheckpoint::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, indexed] : tensors_) names.push_back(name);
  return names;
}

namespace {

// Fills one target from the records its pieces come from.
absl::Status LoadOne(const LoadedCheckpoint& ckpt, const TensorShardRef& target, FileCache& files,
                     std::vector<char>& buffer, LoadStats& stats) {
  std::optional<LoadedCheckpoint::Entry> entry = ckpt.Find(target.name);
  if (!entry) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", ckpt.directory(), " has no tensor '",
                                            target.name, "' (it holds ",
                                            ckpt.manifest().tensors_size(), " tensors)"));
  }
  const TensorRecord& tensor = *entry->record;
  const std::vector<int64_t> stored(tensor.global_shape().begin(), tensor.global_shape().end());
  if (stored != target.global_shape) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tensor ", target.name, ": checkpoint ", ckpt.directory(), " stores global shape ",
        FormatShape(stored), " but this run expects ", FormatShape(target.global_shape)));
  }
  RETURN_IF_ERROR(ValidateRuns(target.runs, NumElements(stored),
                               absl::StrCat("target shard of tensor '", target.name, "'")));
  if (CountElements(target.runs) != target.n || (target.n > 0 && target.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target shard of tensor '", target.name, "': its runs name ", CountElements(target.runs),
        " elements but it holds n = ", target.n, target.data == nullptr ? " with null data" : ""));
  }

  // Visit the needed records one at a time, in file order.
  std::vector<StoredTensorIndex::Piece> pieces = entry->index->Locate(target.runs);
  std::stable_sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) {
    return a.record != b.record ? a.record < b.record : a.record_offset < b.record_offset;
  });
  size_t i = 0;
  while (i < pieces.size()) {
    size_t j = i;
    while (j < pieces.size() && pieces[j].record == pieces[i].record) ++j;
    const ShardRecord& record = tensor.shards(pieces[i].record);
    ASSIGN_OR_RETURN(const ReadableFile* file, files.Get(record.file()));
    const int64_t bytes = record.byte_length();
    // Same layout as the save: the record lands in the target unchanged, so read it
    // there directly and skip the copy.
    const bool direct = j == i + 1 && pieces[i].record_offset == 0 &&
                        pieces[i].length * static_cast<int64_t>(sizeof(float)) == bytes;
    char* dest;
    if (direct) {
      dest = reinterpret_cast<char*>(target.data + pieces[i].target_offset);
    } else {
      if (static_cast<int64_t>(buffer.size()) < bytes) buffer.resize(bytes);
      dest = buffer.data();
    }
    RETURN_IF_ERROR(file->ReadAt(record.byte_offset(), dest, bytes));
    const uint32_t crc = Crc32c(dest, bytes);
    if (crc != record.crc32c()) {
      return absl::DataLossError(absl::StrFormat(
          "checksum mismatch in %s bytes [%d, %d) holding tensor %s (shard written by rank "
          "%d): crc32c expected 0x%08x, found 0x%08x",
          file->path(), record.byte_offset(), record.byte_offset() + bytes, tensor.name(),
          record.writer_rank(), record.crc32c(), crc));
    }
    if (!direct) {
      const float* src = reinterpret_cast<const float*>(buffer.data());
      for (size_t k = i; k < j; ++k) {
        std::copy_n(src + pieces[k].record_offset, pieces[k].length,
                    target.data + pieces[k].target_offset);
      }
    }
    stats.bytes_read += bytes;
    ++stats.records_read;
    i = j;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadTensors(const LoadedCheckpoint& checkpoint,
                         const std::vector<TensorShardRef>& targets, LoadStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  FileCache files(checkpoint.directory());
  std::vector<char> buffer;  // reused across records: one allocation per load
  LoadStats local;
  for (const TensorShardRef& target : targets) {
    RETURN_IF_ERROR(LoadOne(checkpoint, target, files, buffer, local));
    RETURN_IF_ERROR(
        CheckLoadedValuesFinite(target.data, target.n, target.name, checkpoint.directory()));
  }
  local.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats != nullptr) *stats = local;
  return absl::OkStatus();
}

}  // namespace conveyor
