#include "tests/trainer/hf/llama_checkpoint.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/hf/llama_mapping.h"

namespace conveyor::testing_util {

std::string SaveAsCheckpoint(const ResolvedConfig& config, GlobalTensorMap* imported,
                             const std::string& name) {
  CheckpointState state;
  state.config = config.config();
  state.iteration = 3;
  const absl::StatusOr<LlamaDims> dims =
      LlamaDimsFromConfig(config.config(), config.padded_vocab_size());
  EXPECT_TRUE(dims.ok()) << dims.status();
  const auto shapes = LlamaParameterShapes(*dims);
  std::vector<TensorShardRef> shards;
  for (auto& [tensor, data] : *imported) {
    shards.push_back({tensor, shapes.at(tensor), ElementRange(0, int64_t(data.size())), data.data(),
                      int64_t(data.size())});
  }
  SelfCommunicator world;
  const std::string save = FreshDir(name);
  EXPECT_TRUE(SaveCheckpoint(save, state, shards, world).ok());
  return save;
}

}  // namespace conveyor::testing_util
