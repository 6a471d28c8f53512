// A Llama-family import saved as a Conveyor checkpoint, for the export round trips of
// the Hugging Face reference tests.
#ifndef CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_
#define CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_

#include <string>

#include "trainer/config/resolved_config.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor::testing_util {

// Saves `imported` (the import of a folder configuring `config`) as a one-rank
// checkpoint at iteration 3 in a fresh folder named `name`; returns the folder. A
// failure is a test failure.
std::string SaveAsCheckpoint(const ResolvedConfig& config, GlobalTensorMap* imported,
                             const std::string& name);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_
