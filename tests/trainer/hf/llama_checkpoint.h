// The Hugging Face reference tests' folders: written, configured as --load-hf configures
// them, and a Llama-family import saved as a Conveyor checkpoint for the export round
// trips.
#ifndef CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_
#define CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/gpt2_mapping.h"
#include "trainer/hf/safetensors.h"

namespace conveyor::testing_util {

// Writes a fresh folder named `name`: config.json holding `config_json`, and `weights` in
// safetensors files of at most `max_shard_bytes`; returns the folder. A failure is a test
// failure.
std::string WriteHfFolder(const std::string& config_json, const HfTensorMap& weights,
                          const std::string& name, int64_t max_shard_bytes = 5000000000);

// --load-hf's configuration of folder `dir` on `world_size` ranks: the flags a user gives
// (mock data, sequences of `seq` tokens, no dropout, then `extra`), config.json the rest.
absl::StatusOr<ResolvedConfig> LoadHfConfig(const std::string& dir, int64_t seq,
                                            const std::vector<std::string>& extra = {},
                                            int world_size = 1);

// Saves `imported` (the import of a folder configuring `config`) as a one-rank
// checkpoint at iteration 3 in a fresh folder named `name`; returns the folder. A
// failure is a test failure.
std::string SaveAsCheckpoint(const ResolvedConfig& config, GlobalTensorMap* imported,
                             const std::string& name);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_
