#include "tests/trainer/hf/llama_checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/flags.h"
#include "trainer/hf/export.h"
#include "trainer/hf/hf_folder.h"
#include "trainer/hf/llama_mapping.h"

namespace conveyor::testing_util {

std::string WriteHfFolder(const std::string& config_json, const HfTensorMap& weights,
                          const std::string& name, int64_t max_shard_bytes) {
  const std::string dir = FreshDir(name);
  EXPECT_TRUE(WriteHfWeights(dir, weights, max_shard_bytes).ok());
  const std::string path = JoinPath(dir, kHfConfigFile);
  EXPECT_TRUE(WriteFileAtomically(path, config_json, path + ".tmp", Durability::kVisible).ok());
  return dir;
}

absl::StatusOr<ResolvedConfig> LoadHfConfig(const std::string& dir, int64_t seq,
                                            const std::vector<std::string>& extra,
                                            int world_size) {
  std::vector<std::string> args = {"--load-hf",        dir, "--mock-data", "--seq-length",
                                   absl::StrCat(seq), "--hidden-dropout", "0",
                                   "--attention-dropout", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  absl::StatusOr<Config> parsed = ParseFlags(args);
  if (!parsed.ok()) return parsed.status();
  if (absl::Status s = ApplyHfConfig(dir, &*parsed); !s.ok()) return s;
  return ResolvedConfig::Resolve(*parsed, world_size);
}

void CopyImportedParameters(const GlobalTensorMap& imported, GptModel* model) {
  for (Parameter* p : model->parameters().parameters()) {
    ASSERT_EQ(imported.count(p->name), 1) << p->name;
    const std::vector<float>& value = imported.at(p->name);
    ASSERT_EQ(int64_t(value.size()), p->value.numel()) << p->name;
    std::copy(value.begin(), value.end(), p->value.data());
  }
}

TokensAndLabels FixedTokensAndLabels(int64_t seq, int64_t vocab) {
  TokensAndLabels out{std::vector<int32_t>(seq), std::vector<int32_t>(seq)};
  for (int64_t i = 0; i < seq; ++i) {
    out.tokens[i] = int32_t((i * 13 + 5) % vocab);
    out.labels[i] = int32_t((i * 7 + 2) % vocab);
  }
  return out;
}

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
