// Conveyor's side of the Hugging Face reference tests: their folders written and
// configured as --load-hf configures them, an import copied into a model, the fixed
// inputs of the first step, and a Llama-family import saved as a Conveyor checkpoint for
// the export round trips.
#ifndef CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_
#define CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gpt_model.h"
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

// Copies every parameter of `model` from `imported` (ReadHf's tensors), each present and
// of its size. A failure is a test failure.
void CopyImportedParameters(const GlobalTensorMap& imported, GptModel* model);

// The reference tests' fixed inputs: token i is (13 i + 5) mod vocab, its label
// (7 i + 2) mod vocab.
struct TokensAndLabels {
  std::vector<int32_t> tokens;
  std::vector<int32_t> labels;
};
TokensAndLabels FixedTokensAndLabels(int64_t seq, int64_t vocab);

// Saves `imported` (the import of a folder configuring `config`) as a one-rank
// checkpoint at iteration 3 in a fresh folder named `name`; returns the folder. A
// failure is a test failure.
std::string SaveAsCheckpoint(const ResolvedConfig& config, GlobalTensorMap* imported,
                             const std::string& name);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_HF_LLAMA_CHECKPOINT_H_
