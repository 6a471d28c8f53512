// The profiler's record of one process (one rank): named spans of time on each thread,
// kept only while a profile is on (--profile between --profile-step-start and
// --profile-step-end), so that an unprofiled run pays one relaxed atomic load per span.
//
// Spans come from Scope, which opens a span when made and closes it when destroyed:
// spans on one thread therefore nest and never partly overlap, which is what trace
// viewers (Perfetto, chrome://tracing) need to draw them as a flame graph. Each Scope
// is also an NVTX range, so Nsight Systems shows the same names on a GPU run (without
// nsys attached, the NVTX calls do nothing).
#ifndef CONVEYOR_PROFILER_RECORDER_H_
#define CONVEYOR_PROFILER_RECORDER_H_

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace conveyor::profiler {

struct Span {
  std::string name;      // "Gemm", "AllReduceSum", "F3", ...
  const char* category;  // "op", "comm", "pipeline", "phase": a static string
  int thread = 0;        // Recorder::ThisThread() of the thread that ran it
  double start_us = 0;   // on the steady clock all local processes share (NowMicros)
  double end_us = 0;
  std::string args;  // a JSON object's members ("\"bytes\": 4096"), or empty
};

class Recorder {
 public:
  static Recorder& Global();

  bool active() const { return active_.load(std::memory_order_relaxed); }
  void Start() { active_.store(true, std::memory_order_relaxed); }
  void Stop() { active_.store(false, std::memory_order_relaxed); }

  void Add(Span span);
  // The spans recorded so far, which the recorder forgets.
  std::vector<Span> Take();

  // A small number per thread (0 for the first thread to ask, the training thread,
  // then 1, 2, ...) and the threads' names for the trace ("main", "thread 1", ...).
  static int ThisThread();
  std::vector<std::string> ThreadNames() const;

  // Microseconds on the steady clock (CLOCK_MONOTONIC: shared by the processes of
  // one machine, so local ranks' spans line up).
  static double NowMicros();

 private:
  std::atomic<bool> active_{false};
  mutable std::mutex mutex_;
  std::vector<Span> spans_;  // guarded by mutex_
};

class Scope {
 public:
  // `name` and `args` are only built into a Span while the recorder is active; pass
  // cheap values (a string literal, or args made only when Recorder::Global().active()).
  Scope(const char* category, std::string name, std::string args = {});
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool recording_;
  Span span_;
};

}  // namespace conveyor::profiler

#endif  // CONVEYOR_PROFILER_RECORDER_H_
