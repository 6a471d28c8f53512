// One thread that runs data-parallel communication jobs in the order they are launched,
// while the main thread computes: the bucket reductions of --overlap-grad-reduce and
// the parameter all-gathers of --overlap-param-gather. Only this thread uses the DP
// group while jobs are pending; the owner waits for them before using it itself.
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_COMMUNICATION_THREAD_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_COMMUNICATION_THREAD_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "absl/status/status.h"

namespace conveyor {

class CommunicationThread {
 public:
  // `run` performs job `id` (an id of the owner's choosing) on the thread.
  explicit CommunicationThread(std::function<absl::Status(size_t id)> run);
  ~CommunicationThread();  // finishes the queue first

  CommunicationThread(const CommunicationThread&) = delete;
  CommunicationThread& operator=(const CommunicationThread&) = delete;

  // Queues job `id`; it must not be pending already.
  void Launch(size_t id);
  // Whether `id` was launched since the last Forget (pending or done).
  bool Launched(size_t id);
  // Until job `id` has run, if it was launched; then the thread's first error, if any.
  absl::Status Wait(size_t id);
  // Until every launched job has run; then the first error, if any.
  absl::Status WaitAll();
  // Forgets which jobs ran (after WaitAll), so that each may be launched again.
  void Forget();

 private:
  void Work();

  std::function<absl::Status(size_t)> run_;
  std::mutex mu_;
  std::condition_variable wake_;  // a job was queued, or stopping
  std::condition_variable done_;  // a job finished
  std::deque<size_t> queue_;
  std::set<size_t> launched_, finished_;
  bool stop_ = false;
  absl::Status status_;  // the first job error: every later job is skipped
  std::thread thread_;   // last: starts after the members it uses
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_COMMUNICATION_THREAD_H_
