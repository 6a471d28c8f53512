#include "trainer/optimization/communication_thread.h"

#include <utility>

namespace conveyor {

CommunicationThread::CommunicationThread(std::function<absl::Status(size_t)> run)
    : run_(std::move(run)), thread_([this] { Work(); }) {}

CommunicationThread::~CommunicationThread() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return queue_.empty() && launched_.size() == finished_.size(); });
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CommunicationThread::Launch(size_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    launched_.insert(id);
    queue_.push_back(id);
  }
  wake_.notify_all();
}

bool CommunicationThread::Launched(size_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  return launched_.count(id) > 0;
}

absl::Status CommunicationThread::Wait(size_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return launched_.count(id) == 0 || finished_.count(id) > 0; });
  return status_;
}

absl::Status CommunicationThread::WaitAll() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return launched_.size() == finished_.size(); });
  return status_;
}

void CommunicationThread::Forget() {
  std::lock_guard<std::mutex> lock(mu_);
  launched_.clear();
  finished_.clear();
}

void CommunicationThread::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    const size_t id = queue_.front();
    queue_.pop_front();
    const bool skip = !status_.ok();
    lock.unlock();
    // After an error the group is broken: later jobs only report it.
    absl::Status status = skip ? absl::OkStatus() : run_(id);
    lock.lock();
    if (status_.ok() && !status.ok()) status_ = std::move(status);
    finished_.insert(id);
    done_.notify_all();
  }
}

}  // namespace conveyor
