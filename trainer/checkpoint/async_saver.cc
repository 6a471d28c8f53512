#include "trainer/checkpoint/async_saver.h"

#include <utility>

#include "base/status_macros.h"

namespace conveyor {

AsyncCheckpointSaver::AsyncCheckpointSaver(std::string save_dir, CommitGuard guard)
    : save_dir_(std::move(save_dir)), guard_(std::move(guard)) {}

AsyncCheckpointSaver::~AsyncCheckpointSaver() {
  if (thread_.joinable()) thread_.join();
}

int64_t AsyncCheckpointSaver::in_flight_iteration() const {
  return writer_ == nullptr ? -1 : writer_->iteration();
}

absl::Status AsyncCheckpointSaver::Start(const CheckpointState& state,
                                         const std::vector<TensorShardRef>& shards,
                                         Communicator& world) {
  RETURN_IF_ERROR(Finish(world));
  writer_ = std::make_unique<CheckpointWriter>(save_dir_, guard_);
  writer_->AdoptBuffer(std::move(buffer_), buffer_capacity_);
  // A Snapshot error is kept by the writer: Write returns it and Commit spreads it
  // to every rank, so the ranks stay in step.
  absl::Status snapshot = writer_->Snapshot(state, shards, world, SnapshotMode::kCopy);
  (void)snapshot;
  CheckpointWriter* writer = writer_.get();
  thread_ = std::thread([writer] { writer->Write().IgnoreError(); });
  return absl::OkStatus();
}

absl::Status AsyncCheckpointSaver::Finish(Communicator& world) {
  if (writer_ == nullptr) return absl::OkStatus();
  thread_.join();  // orders Write before Commit
  std::unique_ptr<CheckpointWriter> writer = std::move(writer_);
  const absl::Status status = writer->Commit(world);
  if (status.ok()) last_stats_ = writer->write_stats();
  buffer_ = writer->TakeBuffer(&buffer_capacity_);
  return status;
}

}  // namespace conveyor
