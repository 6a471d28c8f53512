#include "trainer/exit_conditions.h"

#include <atomic>
#include <csignal>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

std::atomic<int> received_signal{0};

void RecordSignal(int signal) { received_signal.store(signal); }

}  // namespace

ExitConditions::ExitConditions(const CheckpointConfig& config)
    : config_(config), start_(std::chrono::steady_clock::now()) {
  if (!config.exit_signal_handler()) return;
  struct sigaction action = {};
  action.sa_handler = RecordSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

absl::StatusOr<bool> ExitConditions::ShouldExit(int64_t iteration, Communicator& world,
                                                std::string* reason) {
  const bool by_signal = config_.exit_signal_handler();
  const bool by_interval = config_.exit_interval() > 0;
  const bool by_time = config_.exit_duration_in_mins() > 0;
  if (!by_signal && !by_interval && !by_time) return false;
  // One vote per condition; the max over ranks makes every rank see any rank's vote.
  double votes[3] = {
      by_signal && received_signal.load() != 0 ? 1.0 : 0.0,
      by_interval && iteration % config_.exit_interval() == 0 ? 1.0 : 0.0,
      by_time && std::chrono::steady_clock::now() - start_ >=
                     std::chrono::minutes(config_.exit_duration_in_mins())
          ? 1.0
          : 0.0,
  };
  RETURN_IF_ERROR(world.AllReduceMax(votes, 3));
  if (votes[0] > 0) {
    *reason = "a termination signal arrived (--exit-signal-handler)";
  } else if (votes[1] > 0) {
    *reason = absl::StrFormat("--exit-interval %d", config_.exit_interval());
  } else if (votes[2] > 0) {
    *reason = absl::StrFormat("--exit-duration-in-mins %d", config_.exit_duration_in_mins());
  } else {
    return false;
  }
  return true;
}

}  // namespace conveyor
