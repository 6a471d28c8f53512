// Megatron-LM's GPT-3 175B, Llama-3 8B and Mixtral 8x7B example recipes
// (examples/gpt3/train_gpt3_175b_distributed.sh, examples/llama/train_llama3_8b_h100_fp8.sh,
// examples/mixtral/train_mixtral_8x7b_distributed.sh at d98e8a64),
// their flags written out here, through the trainer's parse, validation and --dry-run plan
// at the script's world size: every flag is accepted (working or a warned no-op), or
// refused for a reason this test names.
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_shape.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/planning/plan.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// A flag of the recipe that Conveyor refuses, with the values it takes and why this
// issue leaves it out. kKept: a layout the script's world size cannot hold; the flag
// stays and the plan is made at a world size that fits.
constexpr int kKept = -1;
struct Refusal {
  std::string flag;
  int values;
  std::string why_left_out;
};

struct Recipe {
  int world_size;  // GPUS_PER_NODE * NUM_NODES of the script
  std::vector<std::string> flags;
  std::vector<Refusal> parse_refusals;  // refused by the flag parser
  // Refused by validation once the parser's refusals are dropped: the flag the error
  // names, and why.
  std::vector<Refusal> validation_refusals;
  std::vector<std::string> warned_no_ops;  // as the warning lists them
};

// A fixture of tests/testdata, from the test's runfiles.
std::string TestDataFile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                      "/tests/testdata/", path);
}

// $DATA_PATH, $VOCAB_FILE, ... of the scripts; the plan reads only the tokenizer.
Recipe Gpt3_175b() {
  return Recipe{
      8,
      {// GPT_MODEL_ARGS
       "--num-layers", "96", "--hidden-size", "12288", "--num-attention-heads", "96",
       "--seq-length", "2048", "--max-position-embeddings", "2048", "--attention-backend", "auto",
       // TRAINING_ARGS
       "--micro-batch-size", "1", "--global-batch-size", "1536", "--rampup-batch-size", "16", "16",
       "5859375", "--train-iters", "500000", "--weight-decay", "0.1", "--adam-beta1", "0.9",
       "--adam-beta2", "0.95", "--init-method-std", "0.006", "--clip-grad", "1.0", "--fp16", "--lr",
       "6.0e-5", "--lr-decay-style", "cosine", "--min-lr", "6.0e-6", "--lr-warmup-fraction", ".001",
       "--lr-decay-iters", "430000",
       // MODEL_PARALLEL_ARGS
       "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "16",
       // DATA_ARGS
       "--data-path", "/data/my-gpt3_00_text_document", "--vocab-file",
       TestDataFile("gpt2/vocab.json"), "--merge-file", TestDataFile("gpt2/merges.txt"),
       "--split", "949,50,1",
       // No --tokenizer-type, as in the script: pretrain_gpt.py's default is
       // GPT2BPETokenizer.
       // EVAL_AND_LOGGING_ARGS
       "--log-interval", "100", "--save-interval", "10000", "--eval-interval", "1000", "--save",
       "/ckpt/gpt3", "--load", "/ckpt/gpt3", "--eval-iters", "10", "--tensorboard-dir", "/tb/gpt3"},
      {},
      {{"--rampup-batch-size", 3,
        "the script ramps an iteration-based run (--train-iters 500000), which Megatron's "
        "validate_args also refuses ('expected no batch-size rampup for iteration-based "
        "training'): Gpt3_175bRampWithTrainSamples plans it with --train-samples"},
       {"--fp16", 0,
        "fp16 training needs dynamic loss scaling, which Conveyor leaves out (bf16 needs none)"},
       {"--tensor-model-parallel-size", kKept,
        "TP 8 x PP 16 = 128 ranks do not fit the script's 8 GPUs (GPUS_PER_NODE=8, "
        "NUM_NODES=1): the script needs 16 nodes, as Megatron would also say"}},
      {"--attention-backend auto"}};
}

Recipe Llama3_8b() {
  return Recipe{
      8,
      {// MODEL_ARGS
       "--use-mcore-models", "--num-layers", "32", "--hidden-size", "4096", "--ffn-hidden-size",
       "14336", "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8",
       "--kv-channels", "128", "--seq-length", "8192", "--max-position-embeddings", "8192",
       "--position-embedding-type", "rope", "--rotary-base", "1000000", "--rotary-percent", "1.0",
       "--attention-dropout", "0.0", "--hidden-dropout", "0.0", "--swiglu", "--init-method-std",
       "0.0134", "--attention-backend", "fused", "--apply-layernorm-1p",
       "--untie-embeddings-and-output-weights", "--disable-bias-linear",
       // TRAINING_ARGS
       "--micro-batch-size", "1", "--global-batch-size", "128", "--train-samples", "1953125000",
       "--lr-decay-samples", "1949218748", "--lr-warmup-samples", "3906252", "--lr", "0.00015",
       "--min-lr", "0.00001", "--decoupled-lr", "5.0e-4", "--decoupled-min-lr", "4.5e-5",
       "--lr-decay-style", "cosine", "--clip-grad", "1.0", "--weight-decay", "0.1", "--adam-beta1",
       "0.9", "--adam-beta2", "0.95", "--bf16", "--grad-reduce-in-bf16",
       "--cross-entropy-loss-fusion", "--calculate-per-token-loss", "--manual-gc",
       "--empty-unused-memory-level", "1", "--exit-duration-in-mins", "235",
       // DTYPE_ARGS (DTYPE=fp8)
       "--fp8-format", "hybrid", "--fp8-amax-history-len", "1024", "--fp8-amax-compute-algo", "max",
       "--fp8-param-gather",
       // MODEL_PARALLEL_ARGS
       "--tensor-model-parallel-size", "1", "--context-parallel-size", "1", "--sequence-parallel",
       // DDP_ARGS
       "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
       // DATA_ARGS_LIST (the MOCK branch; the script's "--split '99,1,0'" passes the
       // quotes on to Python, which reads them as part of the value: written unquoted)
       "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128256",
       "--data-cache-path", "/cache/llama3", "--tiktoken-pattern", "v2", "--split", "99,1,0",
       "--no-create-attention-mask-in-dataloader", "--no-mmap-bin-files", "--num-workers", "1",
       // EVAL_AND_LOGGING_ARGS
       "--log-interval", "1", "--eval-iters", "32", "--eval-interval", "100", "--save-interval",
       "1000", "--log-throughput", "--profile", "--profile-step-start", "4", "--profile-step-end",
       "6", "--ckpt-format", "torch_dist", "--distributed-timeout-minutes", "60", "--save",
       "/ckpt/llama3", "--load", "/ckpt/llama3", "--tensorboard-dir", "/tb/llama3"},
      {{"--fp8-format", 1, "fp8 training is not implemented (bf16 or fp32)"},
       {"--fp8-amax-history-len", 1, "fp8 training is not implemented"},
       {"--fp8-amax-compute-algo", 1, "fp8 training is not implemented"},
       {"--fp8-param-gather", 0, "fp8 training is not implemented"}},
      {},
      {"--use-mcore-models", "--attention-backend fused", "--apply-layernorm-1p",
       "--cross-entropy-loss-fusion", "--manual-gc", "--empty-unused-memory-level 1",
       "--no-create-attention-mask-in-dataloader", "--no-mmap-bin-files", "--num-workers 1",
       "--log-throughput", "--ckpt-format torch_dist"}};
}

// examples/mixtral/train_mixtral_8x7b_distributed.sh. The script's Llama2Tokenizer needs
// Mixtral's tokenizer.model, which the repository does not hold: NullTokenizer with
// Mixtral's 32000 ids stands in (the plan reads only the vocabulary's size).
Recipe Mixtral_8x7b() {
  return Recipe{
      8,
      {// MODEL_ARGS
       "--use-mcore-models", "--disable-bias-linear", "--seq-length", "4096",
       "--max-position-embeddings", "32768", "--num-layers", "32", "--hidden-size", "4096",
       "--ffn-hidden-size", "14336", "--num-attention-heads", "32", "--init-method-std", "0.01",
       "--attention-dropout", "0.0", "--hidden-dropout", "0.0", "--normalization", "RMSNorm",
       "--position-embedding-type", "rope", "--swiglu", "--untie-embeddings-and-output-weights",
       "--group-query-attention", "--num-query-groups", "8", "--no-masked-softmax-fusion",
       "--no-position-embedding", "--rotary-base", "1000000",
       // MOE_ARGS
       "--num-experts", "8", "--moe-router-topk", "2", "--moe-router-load-balancing-type",
       "aux_loss", "--moe-aux-loss-coeff", "1e-2", "--moe-grouped-gemm",
       "--moe-token-dispatcher-type", "alltoall", "--overlap-param-gather",
       "--overlap-grad-reduce",
       // DATA_ARGS
       "--tokenizer-type", "NullTokenizer", "--vocab-size", "32000", "--mock-data", "--split",
       "99990,8,2",
       // TRAINING_ARGS
       "--micro-batch-size", "1", "--global-batch-size", "256", "--lr", "1e-4", "--train-iters",
       "500000", "--lr-decay-iters", "320000", "--lr-decay-style", "cosine", "--min-lr",
       "1.0e-5", "--weight-decay", "0.1", "--lr-warmup-iters", "500", "--clip-grad", "1.0",
       "--bf16",
       // MODEL_PARALLEL_ARGS
       "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "4",
       "--expert-model-parallel-size", "8", "--use-distributed-optimizer", "--sequence-parallel",
       // LOGGING_ARGS (and the WANDB_API_KEY branch)
       "--log-interval", "1", "--save-interval", "10000", "--eval-interval", "1000",
       "--eval-iters", "10", "--save", "/ckpt/mixtral", "--load", "/ckpt/mixtral",
       "--tensorboard-dir", "/ckpt/mixtral/tensorboard", "--no-load-optim", "--no-load-rng",
       "--wandb-project", "Mixtral", "--wandb-exp-name", "Mixtral_8x7B"},
      {},
      {{"--expert-model-parallel-size", kKept,
        "EP 8 over the 2 data-parallel ranks of each of the 4 stages does not fit the script's "
        "8 GPUs (NNODES=1); Megatron's expert rank generator (ETP x EP x PP = 32) refuses it "
        "too: the script needs 4 nodes"}},
      {"--use-mcore-models", "--no-masked-softmax-fusion", "--no-position-embedding",
       "--wandb-project Mixtral", "--wandb-exp-name Mixtral_8x7B"}};
}

std::vector<std::string> Without(const std::vector<std::string>& flags,
                                 const std::vector<Refusal>& refusals) {
  std::vector<std::string> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    const Refusal* refused = nullptr;
    for (const Refusal& r : refusals) refused = flags[i] == r.flag ? &r : refused;
    if (refused == nullptr || refused->values == kKept) {
      out.push_back(flags[i]);
    } else {
      i += refused->values;
    }
  }
  return out;
}

// Whether `line` names `flag`: followed by a space, a comma, a colon or nothing (a
// refusal line names each flag of a feature the command line used: "--a, --b: why").
bool NamesFlag(absl::string_view line, const std::string& flag) {
  for (size_t at = line.find(flag); at != absl::string_view::npos;
       at = line.find(flag, at + 1)) {
    const size_t end = at + flag.size();
    if (end == line.size() || line[end] == ' ' || line[end] == ',' || line[end] == ':') {
      return true;
    }
  }
  return false;
}

// Each line of `message` names one or more of `refusals`, and each is named.
void ExpectRefusedExactly(const std::string& message, const std::vector<Refusal>& refusals) {
  std::set<std::string> named;
  for (const absl::string_view line : absl::StrSplit(message, '\n')) {
    bool known = false;
    for (const Refusal& r : refusals) {
      if (NamesFlag(line, r.flag)) {
        named.insert(r.flag);
        known = true;
      }
    }
    EXPECT_TRUE(known) << "a refusal this test does not expect: " << line;
  }
  for (const Refusal& r : refusals) {
    EXPECT_EQ(named.count(r.flag), 1) << r.flag << " (" << r.why_left_out << ") was accepted";
  }
}

// The plan of the recipe's flags at `world_size`, or the validation error.
absl::StatusOr<std::string> Plan(const std::vector<std::string>& flags, int world_size,
                                 std::vector<std::string>* ignored) {
  std::vector<std::string> args = flags;
  args.push_back("--dry-run");
  const absl::StatusOr<Config> parsed = ParseFlags(args, ignored);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, world_size);
  if (!resolved.ok()) return resolved.status();
  return FormatPlan(*resolved);
}

void CheckRecipe(const Recipe& recipe, int planning_world_size) {
  // The script as written: the parser names each refused flag.
  std::vector<std::string> ignored;
  const absl::StatusOr<std::string> as_written = Plan(recipe.flags, recipe.world_size, &ignored);
  if (recipe.parse_refusals.empty()) {
    EXPECT_TRUE(as_written.ok() || !recipe.validation_refusals.empty()) << as_written.status();
  } else {
    ASSERT_FALSE(as_written.ok());
    ExpectRefusedExactly(std::string(as_written.status().message()), recipe.parse_refusals);
  }
  // Without them: validation at the script's world size.
  const std::vector<std::string> parsable = Without(recipe.flags, recipe.parse_refusals);
  const absl::StatusOr<std::string> validated = Plan(parsable, recipe.world_size, &ignored);
  EXPECT_THAT(ignored, UnorderedElementsAreArray(recipe.warned_no_ops));
  if (recipe.validation_refusals.empty()) {
    ASSERT_TRUE(validated.ok()) << validated.status();
  } else {
    ASSERT_FALSE(validated.ok());
    ExpectRefusedExactly(std::string(validated.status().message()), recipe.validation_refusals);
  }
  // Without every refusal, at a world size the layout fits: the plan.
  std::vector<std::string> plannable = Without(parsable, recipe.validation_refusals);
  const absl::StatusOr<std::string> plan = Plan(plannable, planning_world_size, &ignored);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("plan:"));
}

// Planned on 16 nodes of 8 GPUs: TP 8 x PP 16, DP 1.
TEST(MegatronRecipesTest, Gpt3_175b) { CheckRecipe(Gpt3_175b(), 128); }

TEST(MegatronRecipesTest, Llama3_8b) { CheckRecipe(Llama3_8b(), 8); }

TEST(MegatronRecipesTest, Mixtral_8x7b) { CheckRecipe(Mixtral_8x7b(), 32); }

// The recipe's ramp as Megatron accepts it: sample-based, --train-samples 146484375 (the
// GPT-3 paper's 300B tokens at 2048 per sample) for --train-iters and --lr-decay-samples
// for --lr-decay-iters, bf16 for fp16, on the 128 ranks the layout needs.
TEST(MegatronRecipesTest, Gpt3_175bRampWithTrainSamples) {
  std::vector<std::string> flags =
      Without(Gpt3_175b().flags,
              {{"--train-iters", 1, ""}, {"--lr-decay-iters", 1, ""}, {"--fp16", 0, ""}});
  for (const char* extra :
       {"--train-samples", "146484375", "--lr-decay-samples", "125829120", "--bf16"}) {
    flags.push_back(extra);
  }
  std::vector<std::string> ignored;
  const absl::StatusOr<std::string> plan = Plan(flags, 128, &ignored);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 19802 steps ramp 16 -> 1536 (consuming 5859424 samples), then (146484375 - 5859424)
  // // 1536 = 91552 steps: Megatron's update_train_iters, worked out by hand.
  EXPECT_THAT(*plan, HasSubstr("plan: --rampup-batch-size: 19802 steps ramp the global batch "
                               "from 16 to 1536 over 5859375 samples, then 91552 steps at 1536; "
                               "this plan is for the final global batch"));
}

}  // namespace
}  // namespace conveyor
