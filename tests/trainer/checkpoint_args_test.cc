// --use-checkpoint-args and --use-checkpoint-opt_param-scheduler against Megatron's rules,
// written out here from megatron/training/checkpointing.py (load_args_from_checkpoint's
// _set_arg: a forced setting always comes from the checkpoint, another only when the
// command line left it unset) and OptimizerParamScheduler's saved state.
#include "trainer/config/checkpoint_args.h"

#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

Config Parsed(const std::vector<std::string>& args) {
  absl::StatusOr<Config> config = ParseFlags(args);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : Config();
}

// The Config a checkpoint of this run holds.
Config Saved() {
  return Parsed({"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "8",
                 "--normalization", "RMSNorm", "--tokenizer-type", "GPT2BPETokenizer",
                 "--tensor-model-parallel-size", "2", "--lr", "3e-4", "--min-lr", "3e-5",
                 "--lr-decay-style", "cosine", "--lr-warmup-iters", "10", "--train-iters", "500",
                 "--weight-decay", "0.1"});
}

TEST(CheckpointArgsTest, ModelSettingsFollowMegatronsSetArg) {
  Config config = Parsed({"--use-checkpoint-args", "--num-layers", "4", "--swiglu",
                          "--tokenizer-type", "NullTokenizer", "--lr", "1e-3"});
  std::ostringstream log;
  ApplySavedSettings(Saved(), &config, log);
  EXPECT_EQ(config.model().num_layers(), 4);       // given: not forced
  EXPECT_EQ(config.model().hidden_size(), 64);     // unset: the checkpoint's
  EXPECT_FALSE(config.model().swiglu());           // forced
  EXPECT_EQ(config.model().normalization(), "RMSNorm");
  EXPECT_EQ(config.data().tokenizer_type(), "GPT2BPETokenizer");  // forced by default
  EXPECT_EQ(config.parallel().tensor_model_parallel_size(), 1);    // no mp args
  EXPECT_FLOAT_EQ(config.optimizer().lr(), 1e-3f);                 // not a model setting
  EXPECT_EQ(log.str(),
            "conveyor: --use-checkpoint-args: from the checkpoint --hidden-size 64, "
            "--num-attention-heads 8, --swiglu false, --normalization \"RMSNorm\", "
            "--tokenizer-type \"GPT2BPETokenizer\"\n");
}

TEST(CheckpointArgsTest, TokenizerAndParallelSizesAsAsked) {
  Config config = Parsed({"--use-checkpoint-args", "--no-use-tokenizer-model-from-checkpoint-args",
                          "--use-mp-args-from-checkpoint-args", "--tokenizer-type",
                          "NullTokenizer"});
  std::ostringstream log;
  ApplySavedSettings(Saved(), &config, log);
  EXPECT_EQ(config.data().tokenizer_type(), "NullTokenizer");
  EXPECT_EQ(config.parallel().tensor_model_parallel_size(), 2);
}

TEST(CheckpointArgsTest, TheScheduleIsTheCheckpoints) {
  // Megatron's spelling, with its underscore.
  Config config = Parsed({"--use-checkpoint-opt_param-scheduler", "--lr", "1e-3",
                          "--train-iters", "1000", "--num-layers", "4"});
  std::ostringstream log;
  ApplySavedSettings(Saved(), &config, log);
  EXPECT_FLOAT_EQ(config.optimizer().lr(), 3e-4f);
  EXPECT_FLOAT_EQ(config.optimizer().min_lr(), 3e-5f);
  EXPECT_EQ(config.optimizer().lr_decay_style(), "cosine");
  EXPECT_EQ(config.optimizer().lr_warmup_iters(), 10);
  EXPECT_FLOAT_EQ(config.optimizer().weight_decay(), 0.1f);
  // The saved scheduler decays over the saving run's 500 iterations, not this run's 1000.
  EXPECT_EQ(config.optimizer().lr_decay_iters(), 500);
  EXPECT_EQ(config.training().train_iters(), 1000);
  EXPECT_EQ(config.model().num_layers(), 4);
}

TEST(CheckpointArgsTest, WithoutACheckpointTheCommandLineStays) {
  Config config = Parsed({"--use-checkpoint-args", "--load", "/nonexistent/conveyor-ckpt",
                          "--num-layers", "4"});
  std::ostringstream log;
  ASSERT_TRUE(ApplyCheckpointArgs(&config, log).ok());
  EXPECT_EQ(config.model().num_layers(), 4);
  EXPECT_EQ(log.str(),
            "conveyor: --use-checkpoint-*: --load /nonexistent/conveyor-ckpt holds no "
            "checkpoint, the command line's settings are used\n");
}

}  // namespace
}  // namespace conveyor
