#include "trainer/checkpoint/checkpoint_writer.h"

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/crc32c.h"
#include "trainer/checkpoint/envelope.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"
#include "trainer/checkpoint/tensor_index.h"

namespace conveyor {
namespace {

struct Agreement {
  std::string nonce;
  int64_t iteration;  // rank 0's
};

// Rank 0 draws 48 random bits for the temporary folder's name, so that every rank
// names the same folder and a save never reuses the folder of an interrupted one, and
// tells its iteration, so that a rank saving another one is caught at once. Both
// travel as 16-bit integers, exact in the floats that Communicator::Broadcast carries.
absl::StatusOr<Agreement> Agree(Communicator& world, int64_t iteration) {
  float words[7] = {0, 0, 0, 0, 0, 0, 0};
  if (world.rank() == 0) {
    std::random_device device;
    std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device() ^
                        static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
    const uint64_t bits = rng();
    for (int i = 0; i < 3; ++i) words[i] = static_cast<float>((bits >> (16 * i)) & 0xFFFF);
    const uint64_t it = static_cast<uint64_t>(iteration);
    for (int i = 0; i < 4; ++i) words[3 + i] = static_cast<float>((it >> (16 * i)) & 0xFFFF);
  }
  RETURN_IF_ERROR(world.Broadcast(words, 7, 0));
  Agreement out;
  out.nonce = absl::StrFormat("%04x%04x%04x", static_cast<uint32_t>(words[2]),
                              static_cast<uint32_t>(words[1]), static_cast<uint32_t>(words[0]));
  uint64_t it = 0;
  for (int i = 0; i < 4; ++i) it |= static_cast<uint64_t>(words[3 + i]) << (16 * i);
  out.iteration = static_cast<int64_t>(it);
  return out;
}

}  // namespace

CheckpointWriter::CheckpointWriter(std::string save_dir, CommitGuard guard)
    : save_dir_(std::move(save_dir)), guard_(std::move(guard)) {}

void CheckpointWriter::AdoptBuffer(std::unique_ptr<float[]> buffer, int64_t capacity) {
  copy_ = std::move(buffer);
  copy_capacity_ = copy_ == nullptr ? 0 : capacity;
}

std::unique_ptr<float[]> CheckpointWriter::TakeBuffer(int64_t* capacity) {
  *capacity = copy_capacity_;
  copy_capacity_ = 0;
  return std::move(copy_);
}

std::string CheckpointWriter::final_dir() const {
  return JoinPath(save_dir_, IterationDirName(state_.iteration));
}

std::string CheckpointWriter::Where() const {
  return absl::StrCat("rank ", rank_, ", checkpoint ", final_dir());
}

absl::Status CheckpointWriter::Snapshot(const CheckpointState& state,
                                        const std::vector<TensorShardRef>& shards,
                                        Communicator& world, SnapshotMode mode) {
  if (step_ != Step::kNew) {
    snapshot_status_ = absl::FailedPreconditionError("CheckpointWriter::Snapshot called twice");
    return snapshot_status_;
  }
  step_ = Step::kSnapshotted;
  rank_ = world.rank();
  world_size_ = world.size();
  state_ = state;
  // Communicate first, so that a rank with bad arguments still matches the others.
  absl::StatusOr<Agreement> agreed = Agree(world, state.iteration);
  if (!agreed.ok()) {
    snapshot_status_ = StatusBuilder(agreed.status()) << Where() << ": agreeing on a folder";
    return snapshot_status_;
  }
  nonce_ = agreed->nonce;
  temp_dir_ = JoinPath(save_dir_, TempDirName(state.iteration, nonce_));
  if (state.iteration < 0) {
    snapshot_status_ = absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": cannot save iteration ", state.iteration));
  } else if (agreed->iteration != state.iteration) {
    snapshot_status_ = absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, " saves iteration ", state.iteration,
                     " but rank 0 saves iteration ", agreed->iteration));
  } else {
    snapshot_status_ = StatusBuilder(CaptureShards(shards, mode)) << Where();
  }
  return snapshot_status_;
}

absl::Status CheckpointWriter::CaptureShards(const std::vector<TensorShardRef>& shards,
                                             SnapshotMode mode) {
  int64_t total = 0;
  for (const TensorShardRef& s : shards) {
    const std::string what = absl::StrCat("shard of tensor '", s.name, "'");
    if (s.name.empty()) return absl::InvalidArgumentError("a shard has an empty tensor name");
    for (int64_t d : s.global_shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": global shape ", FormatShape(s.global_shape), " has a negative dimension"));
      }
    }
    RETURN_IF_ERROR(
        ValidateRuns(s.runs, NumElements(s.global_shape),
                     absl::StrCat(what, " (global shape ", FormatShape(s.global_shape), ")")));
    if (CountElements(s.runs) != s.n) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": its runs name ", CountElements(s.runs), " elements but it holds n = ", s.n));
    }
    if (s.n > 0 && s.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": data is null"));
    }
    total += s.n;
  }
  float* copy = nullptr;
  if (mode == SnapshotMode::kCopy && total > 0) {
    if (copy_capacity_ < total) {
      copy_.reset(new float[total]);  // uninitialised: every element is copied next
      copy_capacity_ = total;
    }
    copy = copy_.get();
  }
  shards_.clear();
  shards_.reserve(shards.size());
  for (const TensorShardRef& s : shards) {
    const float* data = s.data;
    if (copy != nullptr && s.n > 0) {
      std::memcpy(copy, s.data, s.n * sizeof(float));
      data = copy;
      copy += s.n;
    }
    shards_.push_back({s.name, s.global_shape, s.runs, data, s.n});
  }
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Write() {
  if (step_ != Step::kSnapshotted) {
    write_status_ =
        absl::FailedPreconditionError("CheckpointWriter::Write must follow Snapshot and run once");
    return write_status_;
  }
  step_ = Step::kWritten;
  if (!snapshot_status_.ok()) {
    write_status_ = snapshot_status_;
    return write_status_;
  }
  const auto start = std::chrono::steady_clock::now();
  write_status_ = StatusBuilder(WriteFiles()) << Where();
  write_stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return write_status_;
}

absl::Status CheckpointWriter::WriteFiles() {
  // Not MakeDirs: a --save folder that vanished was moved or deleted under the run,
  // and recreating it would save outside the lock that guarded the original. The
  // guard (rank 0's) says best what happened; it is asked again before the commit.
  if (guard_) RETURN_IF_ERROR(guard_());
  if (!IsDirectory(save_dir_)) {
    return absl::AbortedError(absl::StrCat(
        "the save folder ", save_dir_,
        " no longer exists (moved or deleted while the run was training?); it is not recreated"));
  }
  if (absl::Status made = MakeDir(temp_dir_); !made.ok() && !IsDirectory(temp_dir_)) return made;
  ManifestFragment fragment;
  fragment.set_rank(rank_);
  fragment.set_world_size(world_size_);
  fragment.set_iteration(state_.iteration);
  for (const NamedRngState& rng : state_.rng_states) {
    RngState* out = fragment.add_rng_states();
    out->set_rank(rank_);
    out->set_name(rng.name);
    out->set_state(rng.state);
  }
  if (!shards_.empty()) {
    const std::string file_name = DataFileName(rank_);
    ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(JoinPath(temp_dir_, file_name)));
    // The checksum of the next shard is computed on another thread while this one is
    // written, so the write waits for the disk only.
    auto checksum = [this](size_t k) {
      return std::async(std::launch::async, [&s = shards_[k]] {
        return Crc32c(s.data, s.n * static_cast<int64_t>(sizeof(float)));
      });
    };
    std::future<uint32_t> next_crc = checksum(0);
    for (size_t k = 0; k < shards_.size(); ++k) {
      const PendingShard& s = shards_[k];
      const uint32_t crc = next_crc.get();
      if (k + 1 < shards_.size()) next_crc = checksum(k + 1);
      const int64_t bytes = s.n * static_cast<int64_t>(sizeof(float));
      TensorRecord* tensor = fragment.add_tensors();
      tensor->set_name(s.name);
      for (int64_t d : s.global_shape) tensor->add_global_shape(d);
      tensor->set_dtype(ELEMENT_FLOAT32);
      ShardRecord* record = tensor->add_shards();
      RunsToProto(s.runs, record->mutable_runs());
      record->set_file(file_name);
      record->set_byte_offset(file.size());
      record->set_byte_length(bytes);
      record->set_crc32c(crc);
      record->set_writer_rank(rank_);
      RETURN_IF_ERROR(file.Append(s.data, bytes));
    }
    write_stats_.bytes = file.size();
    RETURN_IF_ERROR(file.SyncAndClose());
  }
  RETURN_IF_ERROR(WriteEnvelopeFile(JoinPath(temp_dir_, FragmentFileName(rank_)), fragment));
  return SyncDir(temp_dir_);
}

absl::Status CheckpointWriter::Commit(Communicator& world) {
  absl::Status local = write_status_;
  if (step_ != Step::kWritten) {
    local = absl::FailedPreconditionError(
        absl::StrCat("rank ", world.rank(), ": CheckpointWriter::Commit must follow Write"));
  }
  step_ = Step::kCommitted;

  // Every rank learns which ranks failed; this is also the barrier after which rank
  // 0 may read every fragment.
  std::vector<double> failed(world.size(), 0.0);
  failed[world.rank()] = local.ok() ? 0.0 : 1.0;
  RETURN_IF_ERROR(world.AllReduceMax(failed.data(), world.size()))
      << Where() << ": agreeing that every rank wrote";
  std::vector<int> failed_ranks;
  for (int r = 0; r < world.size(); ++r) {
    if (failed[r] != 0.0) failed_ranks.push_back(r);
  }
  if (!failed_ranks.empty()) {
    // Best effort: nothing refers to the temporary folder, so leaving it is harmless.
    if (world.rank() == 0 && !temp_dir_.empty()) RemoveTree(temp_dir_).IgnoreError();
    if (!local.ok()) return local;
    return absl::AbortedError(absl::StrCat("checkpoint ", final_dir(), " was not saved: rank(s) ",
                                           absl::StrJoin(failed_ranks, ","),
                                           " failed to write their shards (see their logs)"));
  }

  absl::Status published;
  float outcome = 0;
  if (world.rank() == 0) {
    bool renamed = false;
    published = StatusBuilder(Publish(&renamed)) << Where();
    if (!published.ok() && !renamed) RemoveTree(temp_dir_).IgnoreError();
    outcome = published.ok() ? 0 : 1;
  }
  RETURN_IF_ERROR(world.Broadcast(&outcome, 1, 0))
      << Where() << ": learning whether rank 0 committed";
  if (world.rank() == 0) return published;
  if (outcome != 0) {
    return absl::AbortedError(
        absl::StrCat("checkpoint ", final_dir(), " was not committed by rank 0 (see its log)"));
  }
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Publish(bool* renamed) {
  Manifest manifest;
  manifest.set_format_version(kCheckpointFormatVersion);
  *manifest.mutable_config() = state_.config;
  manifest.set_iteration(state_.iteration);
  manifest.set_consumed_samples(state_.consumed_samples);
  *manifest.mutable_data_position() = state_.data_position;
  *manifest.mutable_layout() = state_.layout;
  manifest.mutable_layout()->set_world_size(world_size_);
  manifest.set_optimizer_steps(state_.optimizer_steps);
  manifest.set_save_time_unix_seconds(absl::ToUnixSeconds(absl::Now()));

  // Merge the fragments: one TensorRecord per name, sorted by name.
  std::map<std::string, std::pair<int, TensorRecord>> merged;  // name -> (first rank, record)
  for (int r = 0; r < world_size_; ++r) {
    const std::string path = JoinPath(temp_dir_, FragmentFileName(r));
    ManifestFragment fragment;
    RETURN_IF_ERROR(ReadEnvelopeFile(path, &fragment));
    if (fragment.rank() != r || fragment.world_size() != world_size_ ||
        fragment.iteration() != state_.iteration) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is from rank ", fragment.rank(), " of ", fragment.world_size(),
          " saving iteration ", fragment.iteration(), "; expected rank ", r, " of ", world_size_,
          " saving iteration ", state_.iteration, " (do all ranks save the same iteration?)"));
    }
    for (RngState& rng : *fragment.mutable_rng_states()) {
      *manifest.add_rng_states() = std::move(rng);
    }
    for (TensorRecord& tensor : *fragment.mutable_tensors()) {
      const std::string name = tensor.name();  // copied: `tensor` may be moved below
      auto it = merged.find(name);
      if (it == merged.end()) {
        merged.emplace(name, std::make_pair(r, std::move(tensor)));
        continue;
      }
      const TensorRecord& first = it->second.second;
      const std::vector<int64_t> a(first.global_shape().begin(), first.global_shape().end());
      const std::vector<int64_t> b(tensor.global_shape().begin(), tensor.global_shape().end());
      if (a != b || first.dtype() != tensor.dtype()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", tensor.name(), " has global shape ", FormatShape(a),
                         " on rank ", it->second.first, " but ", FormatShape(b), " on rank ", r));
      }
      for (ShardRecord& shard : *tensor.mutable_shards()) {
        *it->second.second.add_shards() = std::move(shard);
      }
    }
  }
  for (auto& [name, entry] : merged) {
    // Refuses gaps and double coverage before anything becomes visible.
    RETURN_IF_ERROR(StoredTensorIndex::Build(entry.second).status());
    *manifest.add_tensors() = std::move(entry.second);
  }

  RETURN_IF_ERROR(WriteEnvelopeFile(JoinPath(temp_dir_, kManifestFileName), manifest));
  for (int r = 0; r < world_size_; ++r) {
    RETURN_IF_ERROR(RemoveFile(JoinPath(temp_dir_, FragmentFileName(r))));
  }
  RETURN_IF_ERROR(SyncDir(temp_dir_));

  if (guard_) RETURN_IF_ERROR(guard_());
  RETURN_IF_ERROR(MoveIntoPlace(renamed));
  if (guard_) RETURN_IF_ERROR(guard_());
  return WriteLatestIteration(save_dir_, state_.iteration, nonce_);
}

absl::Status CheckpointWriter::MoveIntoPlace(bool* renamed) {
  const std::string final_path = final_dir();
  if (!PathExists(final_path)) {
    RETURN_IF_ERROR(Rename(temp_dir_, final_path));
    *renamed = true;
    return SyncDir(save_dir_);
  }
  // Saving an iteration again (e.g. a rerun): swap atomically, so that a crash
  // leaves either the old or the new checkpoint under the name, then drop the old.
  const absl::Status exchanged = Exchange(temp_dir_, final_path);
  if (exchanged.ok()) {
    *renamed = true;
    RETURN_IF_ERROR(SyncDir(save_dir_));
    RETURN_IF_ERROR(RemoveTree(temp_dir_));
    return SyncDir(save_dir_);
  }
  if (!absl::IsUnimplemented(exchanged)) return exchanged;
  // No atomic swap here (NFS): move the old folder aside under a temporary name that
  // loaders ignore, then the new one into place. A crash in between is repaired by
  // RestoreInterruptedReplacements at the next start.
  const std::string aside = absl::StrCat(temp_dir_, kReplacedSuffix);
  RETURN_IF_ERROR(Rename(final_path, aside));
  RETURN_IF_ERROR(SyncDir(save_dir_));
  RETURN_IF_ERROR(Rename(temp_dir_, final_path));
  *renamed = true;
  RETURN_IF_ERROR(SyncDir(save_dir_));
  RETURN_IF_ERROR(RemoveTree(aside));
  return SyncDir(save_dir_);
}

absl::Status SaveCheckpoint(const std::string& save_dir, const CheckpointState& state,
                            const std::vector<TensorShardRef>& shards, Communicator& world,
                            CommitGuard guard) {
  CheckpointWriter writer(save_dir, std::move(guard));
  // Errors of the first two steps reach every rank through Commit.
  writer.Snapshot(state, shards, world, SnapshotMode::kBorrow).IgnoreError();
  writer.Write().IgnoreError();
  return writer.Commit(world);
}

absl::Status ProbeSaveFolder(const std::string& save_dir, int rank) {
  RETURN_IF_ERROR(MakeDirs(save_dir));
  // Named by rank, and unlike any checkpoint name, so that concurrent ranks and
  // loaders never see each other's probe as data.
  const std::string probe =
      JoinPath(save_dir, absl::StrFormat(".conveyor-write-probe.rank_%05d", rank));
  {
    ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(probe));
  }  // closed without fsync: only the permission matters
  return RemoveFile(probe);
}

absl::StatusOr<std::vector<std::string>> RestoreInterruptedReplacements(
    const std::string& save_dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(save_dir);
  if (absl::IsNotFound(names.status())) return std::vector<std::string>();
  RETURN_IF_ERROR(names.status());
  std::vector<std::string> restored;
  for (const std::string& name : *names) {
    if (!absl::EndsWith(name, kReplacedSuffix)) continue;
    const std::string base = name.substr(0, name.find(".tmp-"));
    if (!ParseIterationDirName(base) || PathExists(JoinPath(save_dir, base))) continue;
    RETURN_IF_ERROR(Rename(JoinPath(save_dir, name), JoinPath(save_dir, base)));
    restored.push_back(base);
  }
  if (!restored.empty()) RETURN_IF_ERROR(SyncDir(save_dir));
  return restored;
}

absl::StatusOr<std::vector<std::string>> RemoveInterruptedSaves(const std::string& save_dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(save_dir);
  if (absl::IsNotFound(names.status())) return std::vector<std::string>();
  RETURN_IF_ERROR(names.status());
  std::vector<std::string> removed;
  for (const std::string& name : *names) {
    const size_t tmp = name.find(".tmp-");
    if (tmp == std::string::npos) continue;
    const std::string base = name.substr(0, tmp);
    if (!ParseIterationDirName(base) && base != kLatestFileName) continue;
    RETURN_IF_ERROR(RemoveTree(JoinPath(save_dir, name)));
    removed.push_back(name);
  }
  if (!removed.empty()) RETURN_IF_ERROR(SyncDir(save_dir));
  return removed;
}

}  // namespace conveyor
