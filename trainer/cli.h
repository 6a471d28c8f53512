// The trainer's command line: flags -> validated config -> plan or training run.
// Returns the process exit code: 0 success, 1 a failure while running, 2 a usage error
// (bad flags or config), as argparse-based launchers do.
#ifndef CONVEYOR_TRAINER_CLI_H_
#define CONVEYOR_TRAINER_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace conveyor {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `args` excludes the program name.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CLI_H_
