// `trainer export`: converts a Conveyor checkpoint to another framework's format.
//
//   trainer export --load DIR [--ckpt-step N] --format hf|hf-gpt2 --output DIR [...]
#ifndef CONVEYOR_TRAINER_HF_EXPORT_COMMAND_H_
#define CONVEYOR_TRAINER_HF_EXPORT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace conveyor {

// `args` are the words after "export". Flags take "--flag VALUE" or "--flag=VALUE".
// Prints a summary (iteration, tensors, parameters, bytes) to `out` and problems to
// `err`. Returns the process exit code: 0 done, 1 the export failed, 2 a usage error
// (every usage problem is listed, with the usage line).
int RunExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_EXPORT_COMMAND_H_
