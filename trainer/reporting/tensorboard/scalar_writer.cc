#include "trainer/reporting/tensorboard/scalar_writer.h"

#include <chrono>
#include <vector>

#include "base/status_macros.h"

namespace conveyor::tensorboard {

absl::StatusOr<std::unique_ptr<ScalarWriter>> ScalarWriter::Start(const std::string& dir,
                                                                  int queue_size) {
  ASSIGN_OR_RETURN(std::unique_ptr<EventFile> file, EventFile::Create(dir));
  return std::unique_ptr<ScalarWriter>(new ScalarWriter(std::move(file), queue_size));
}

ScalarWriter::ScalarWriter(std::unique_ptr<EventFile> file, int queue_size)
    : file_(std::move(file)), queue_size_(static_cast<size_t>(queue_size)) {
  thread_ = std::thread([this] { WriteLoop(); });
}

ScalarWriter::~ScalarWriter() { Close().IgnoreError(); }

void ScalarWriter::Add(const std::string& tag, double value, int64_t step) {
  Event event;
  event.set_wall_time(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  event.set_step(step);
  Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_ || queue_.size() >= queue_size_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(event));
  }
  wake_.notify_one();
}

void ScalarWriter::WriteLoop() {
  std::vector<Event> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing, all written
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
    }
    // After a failed write the rest is discarded: the run goes on, and Close reports it.
    if (status_.ok()) status_ = file_->Append(batch);
    batch.clear();
  }
}

absl::Status ScalarWriter::Close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  return status_;
}

int64_t ScalarWriter::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

}  // namespace conveyor::tensorboard
