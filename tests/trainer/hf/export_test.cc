// End to end: a Conveyor checkpoint, saved by the checkpoint library, exported to a
// Hugging Face GPT-2 folder and read back, gives back the same weights.
#include "trainer/hf/export.h"

#include <sstream>
#include <string>
#include <vector>

#include "data/python_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/trainer/hf/hf_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/config_validation.h"
#include "trainer/hf/export_command.h"
#include "trainer/hf/gpt2_config_json.h"
#include "trainer/hf/hf_config_fields.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::FreshDir;
using testing_util::PatternParameters;
using testing_util::SmallGpt2Config;
using testing_util::WithZeroPadding;

// --format hf-gpt2.
HfExportOptions Gpt2Only() {
  HfExportOptions options;
  options.gpt2_only = true;
  return options;
}

Gpt2Dims DimsOf(const Config& config) {
  const absl::StatusOr<Gpt2Dims> dims = Gpt2DimsFromConfig(config, PaddedVocabSize(config));
  EXPECT_TRUE(dims.ok()) << dims.status();
  return *dims;
}

// Saves `tensors` as iteration `iteration` of a one-rank run. Each tensor is passed
// as two halves, as two tensor-parallel ranks would hold it, so the export has to
// gather shards.
absl::Status SaveModel(const std::string& dir, const Config& config, int64_t iteration,
                       GlobalTensorMap& tensors, const Gpt2Dims& dims) {
  CheckpointState state;
  state.config = config;
  state.iteration = iteration;
  std::vector<TensorShardRef> shards;
  const auto shapes = GptParameterShapes(dims);
  for (auto& [name, data] : tensors) {
    const int64_t n = int64_t(data.size());
    const int64_t half = n / 2;
    shards.push_back({name, shapes.at(name), ElementRange(0, half), data.data(), half});
    shards.push_back(
        {name, shapes.at(name), ElementRange(half, n - half), data.data() + half, n - half});
  }
  SelfCommunicator world;
  return SaveCheckpoint(dir, state, shards, world);
}

TEST(HfExportTest, ExportThenReadGivesBackTheWeights) {
  const Config config = SmallGpt2Config();
  const Gpt2Dims dims = DimsOf(config);
  ASSERT_EQ(dims.padded_vocab, 64);
  GlobalTensorMap original = PatternParameters(dims);
  const std::string save = FreshDir("save");
  ASSERT_TRUE(SaveModel(save, config, 7, original, dims).ok());

  const std::string out = FreshDir("export") + "/gpt2";
  HfExportSummary summary;
  const absl::Status exported = ExportHf(save, std::nullopt, out, Gpt2Only(), &summary);
  ASSERT_TRUE(exported.ok()) << exported;
  EXPECT_EQ(summary.iteration, 7);
  EXPECT_EQ(summary.tensors, 4 + 12 * 2);
  const int64_t h = 8, per_layer = 4 * h + 3 * h * h + 3 * h + h * h + h + 8 * h * h + 5 * h;
  EXPECT_EQ(summary.parameters, 50 * h + 16 * h + 2 * h + 2 * per_layer);
  const absl::StatusOr<ReadableFile> weights = ReadableFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ(summary.bytes, weights->size());
  const absl::StatusOr<std::vector<std::string>> listing = ListDir(out);
  ASSERT_TRUE(listing.ok());
  EXPECT_THAT(*listing, ElementsAre("config.json", "model.safetensors"));  // no temp files

  const absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_THAT(file->Find("transformer.wte.weight")->shape, ElementsAre(50, 8));
  EXPECT_THAT(file->Find("transformer.h.1.attn.c_attn.weight")->shape, ElementsAre(8, 24));

  const absl::StatusOr<GlobalTensorMap> read = ReadHf(out, config);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, WithZeroPadding(original, dims));
}

TEST(HfExportTest, ExportsTheChosenIteration) {
  const Config config = SmallGpt2Config();
  const Gpt2Dims dims = DimsOf(config);
  const std::string save = FreshDir("save_steps");
  GlobalTensorMap first = PatternParameters(dims);
  ASSERT_TRUE(SaveModel(save, config, 1, first, dims).ok());
  GlobalTensorMap second = PatternParameters(dims);
  for (auto& [name, data] : second) data[0] = -1.0f;
  ASSERT_TRUE(SaveModel(save, config, 2, second, dims).ok());

  const std::string out = FreshDir("export_steps");
  HfExportSummary summary;
  ASSERT_TRUE(ExportHf(save, 1, out, Gpt2Only(), &summary).ok());
  EXPECT_EQ(summary.iteration, 1);
  const absl::StatusOr<GlobalTensorMap> read = ReadHf(out, config);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, WithZeroPadding(first, dims));
}

TEST(HfExportTest, ConfigJsonDescribesGpt2) {
  const Config config = SmallGpt2Config();
  const absl::StatusOr<Json> json = ParseJson(Gpt2ConfigJson(config, DimsOf(config)));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(AsString((*json)["architectures"][0]), "GPT2LMHeadModel");
  EXPECT_EQ(AsString((*json)["model_type"]), "gpt2");
  EXPECT_EQ(AsInt64((*json)["vocab_size"]), 50);
  EXPECT_EQ(AsInt64((*json)["n_positions"]), 16);
  EXPECT_EQ(AsInt64((*json)["n_embd"]), 8);
  EXPECT_EQ(AsInt64((*json)["n_layer"]), 2);
  EXPECT_EQ(AsInt64((*json)["n_head"]), 2);
  EXPECT_TRUE((*json)["n_inner"].is_null());
  EXPECT_EQ(AsString((*json)["activation_function"]), "gelu_new");
  EXPECT_EQ(AsDouble((*json)["layer_norm_epsilon"]), 1e-5);
  EXPECT_TRUE(AsBool((*json)["tie_word_embeddings"]));
  EXPECT_EQ(AsInt64((*json)["eos_token_id"]), 49);
}

TEST(HfExportTest, ReadNamesEveryConfigDifference) {
  const Config config = SmallGpt2Config();
  const absl::StatusOr<Json> json = ParseJson(
      "{\"model_type\": \"gpt2\", \"n_layer\": 3, \"n_embd\": 8, \"n_head\": 4,"
      " \"vocab_size\": 50257, \"n_positions\": 8, \"activation_function\": \"gelu\"}");
  ASSERT_TRUE(json.ok());
  const absl::Status status = CheckGpt2ConfigJson(*json, "x/config.json", config, DimsOf(config));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr("x/config.json"), HasSubstr("n_layer is 3"), HasSubstr("--num-layers is 2"),
            HasSubstr("n_head is 4"), HasSubstr("vocab_size is 50257"),
            HasSubstr("n_positions is 8")));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("n_embd")));
  // The fields that need no model are the field table's (hf_config_fields.h).
  const absl::Status fields =
      CheckHfConfigFields(*json, "x/config.json", HfArchitectures().front(), nullptr);
  EXPECT_THAT(fields.message(), HasSubstr("activation_function = \"gelu\" is not supported: "
                                          "Conveyor supports \"gelu_new\""));
}

TEST(HfExportTest, ReadRefusesAModelOfAnotherShape) {
  const Config config = SmallGpt2Config();
  const Gpt2Dims dims = DimsOf(config);
  GlobalTensorMap original = PatternParameters(dims);
  const std::string save = FreshDir("save_shape");
  ASSERT_TRUE(SaveModel(save, config, 3, original, dims).ok());
  const std::string out = FreshDir("export_shape");
  ASSERT_TRUE(ExportHf(save, std::nullopt, out, Gpt2Only()).ok());

  Config deeper = config;
  deeper.mutable_model()->set_num_layers(3);
  const auto read = ReadHf(out, deeper);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), AllOf(HasSubstr("config.json"), HasSubstr("n_layer")));

  Config rope = config;
  rope.mutable_model()->set_position_embedding_type("rope");
  EXPECT_THAT(ReadHf(out, rope).status().message(), HasSubstr("--position-embedding-type"));

  EXPECT_EQ(ReadHf(FreshDir("empty"), config).status().code(), absl::StatusCode::kNotFound);
}

TEST(HfExportTest, RefusesANonGpt2Checkpoint) {
  Config config = SmallGpt2Config();
  const Gpt2Dims dims = DimsOf(config);
  GlobalTensorMap tensors = PatternParameters(dims);
  config.mutable_model()->set_normalization("RMSNorm");  // stored config disagrees
  config.mutable_model()->set_swiglu(true);
  const std::string save = FreshDir("save_llama");
  ASSERT_TRUE(SaveModel(save, config, 5, tensors, dims).ok());
  const absl::Status status = ExportHf(save, std::nullopt, FreshDir("export_llama"), Gpt2Only());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(save), HasSubstr("--normalization is RMSNorm"),
                                      HasSubstr("--swiglu")));
}

TEST(ExportCommandTest, ExportsAndPrintsASummary) {
  const Config config = SmallGpt2Config();
  const Gpt2Dims dims = DimsOf(config);
  GlobalTensorMap tensors = PatternParameters(dims);
  const std::string save = FreshDir("save_cmd");
  ASSERT_TRUE(SaveModel(save, config, 4, tensors, dims).ok());
  const std::string out = FreshDir("export_cmd");
  std::ostringstream stdout_text, stderr_text;
  EXPECT_EQ(
      RunExportCommand({"--load", save, "--ckpt-step=4", "--format", "hf-gpt2", "--output", out},
                       stdout_text, stderr_text),
      0)
      << stderr_text.str();
  EXPECT_THAT(stdout_text.str(), AllOf(HasSubstr("iteration 4"), HasSubstr("28 tensors"), HasSubstr("(GPT2LMHeadModel)"),
                                       HasSubstr("parameters"), HasSubstr("bytes")));
  EXPECT_TRUE(PathExists(out + "/config.json"));
}

TEST(ExportCommandTest, UsageErrorsExitTwoAndListEveryProblem) {
  std::ostringstream out, err;
  EXPECT_EQ(RunExportCommand({"--format", "onnx", "--ckpt-step", "ten", "--bogus"}, out, err), 2);
  EXPECT_THAT(err.str(),
              AllOf(HasSubstr("--load is required"), HasSubstr("--output is required"),
                    HasSubstr("--format onnx is not supported"), HasSubstr("--ckpt-step"),
                    HasSubstr("unknown flag --bogus"), HasSubstr("run with --help")));
  // The problems alone: the whole help after them would push them off the screen.
  EXPECT_THAT(err.str(), Not(HasSubstr("usage:")));

  std::ostringstream out2, err2;
  EXPECT_EQ(RunExportCommand({"--load"}, out2, err2), 2);
  EXPECT_THAT(err2.str(), HasSubstr("--load is missing its value: pass --load STRING"));

  std::ostringstream out3, err3;
  EXPECT_EQ(RunExportCommand({"--help"}, out3, err3), 0);
  EXPECT_THAT(out3.str(), HasSubstr("usage:"));
  // The flags' help comes from ExportOptions in proto/tools.proto.
  EXPECT_THAT(out3.str(), AllOf(HasSubstr("--ckpt-step INT"), HasSubstr("--format STRING"),
                                HasSubstr("Iteration to export")));
}

// A --load folder that holds no checkpoint is input the user must change: 2, as for
// every refusal of input (base/exit_code.h).
TEST(ExportCommandTest, MissingCheckpointExitsTwoWithTheReason) {
  std::ostringstream out, err;
  const std::string missing = FreshDir("no_checkpoint");
  EXPECT_EQ(
      RunExportCommand({"--load", missing, "--format", "hf-gpt2", "--output", FreshDir("unused")},
                       out, err),
      2);
  EXPECT_THAT(err.str(), HasSubstr(missing));
}

}  // namespace
}  // namespace conveyor
