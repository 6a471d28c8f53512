// --profile for one rank of a training run: starts the recorder (profiler/recorder.h)
// after --profile-step-start iterations and stops it after --profile-step-end, and at
// the end writes every rank's spans into one Chrome/Perfetto trace (--profile-file)
// with one process per rank.
//
// The trace's threads per rank: the training thread, whose spans nest as
//   iteration > phase (forward-backward, grads-reduce, optimizer)
//     > pipeline action (F0, BW0, W0, or a batch of transfers "sF0>1 rB0<1")
//       > op (Gemm, ...) or communication (AllReduceSum, with bytes and group),
// and any other thread that communicates (the --overlap-grad-reduce thread).
#ifndef CONVEYOR_TRAINER_REPORTING_STEP_PROFILER_H_
#define CONVEYOR_TRAINER_REPORTING_STEP_PROFILER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "parallel/communicator.h"
#include "proto/config.pb.h"

namespace conveyor::profiler {

class StepProfiler {
 public:
  // `world_rank` decides whether this rank is among --profile-ranks.
  StepProfiler(const LoggingConfig& logging, int world_rank);

  // Whether this rank records at all (--profile and among --profile-ranks).
  bool enabled() const { return enabled_; }

  // A warning when a run that resumes after `resumed_iteration` completed iterations
  // has left --profile's window behind (the trace would be empty), else empty. The
  // window past --train-iters is refused or warned of before the run starts.
  std::string ResumedPastTheWindow(int64_t resumed_iteration) const;

  // Around each training step: `iteration` counts from 1, the step about to run.
  void BeforeStep(int64_t iteration);
  void AfterStep(int64_t iteration);

  // Writes the trace; every rank of `world` must call when --profile is on, profiled
  // or not. `process_name` names this rank's row ("rank 3 (tp 1, pp 1, dp 0)").
  absl::Status Finish(const std::string& process_name, Communicator& world);

 private:
  bool profiling(int64_t iteration) const;

  const LoggingConfig& logging_;
  const bool enabled_;
};

}  // namespace conveyor::profiler

#endif  // CONVEYOR_TRAINER_REPORTING_STEP_PROFILER_H_
