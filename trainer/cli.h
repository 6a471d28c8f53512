// The trainer's command line: flags -> validated config -> plan or training run.
// Returns the process exit code by the project's one rule (base/exit_code.h): 0 success,
// 2 input refused (flags, config or data files, checkpoints), 1 a failure while running.
#ifndef CONVEYOR_TRAINER_CLI_H_
#define CONVEYOR_TRAINER_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "base/exit_code.h"

namespace conveyor {

// `args` excludes the program name.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CLI_H_
