// ResolvedConfig: the choice enums cover every choice config.proto declares, and the
// derived sizes of a few layouts.
#include "trainer/config/resolved_config.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/pipeline/schedule.h"
#include "proto/config_choices.h"
#include "tests/data/shared_data.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/effective_config.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Parses `choice` into Enum and back; returns the enum value as an int (-1: none).
template <typename Enum>
int RoundTrip(const std::string& choice) {
  const std::optional<Enum> value = ParseChoice<Enum>(choice);
  if (!value.has_value()) return -1;
  EXPECT_EQ(ChoiceName(*value), choice);
  return static_cast<int>(*value);
}

// Every string field with (choices): its enum has a value for each choice, one value
// per choice. A new choice field must be added here (or to the fields mapped elsewhere).
TEST(ResolvedConfigTest, EveryDeclaredChoiceHasItsEnumValue) {
  const std::map<std::string, std::function<int(const std::string&)>> enums = {
      {"position_embedding_type", RoundTrip<PositionEmbeddingType>},
      {"normalization", RoundTrip<Normalization>},
      {"device", RoundTrip<DeviceKind>},
      {"nan_policy", RoundTrip<NanPolicy>},
      {"optimizer", RoundTrip<OptimizerKind>},
      {"lr_decay_style", RoundTrip<LrDecayStyle>},
      {"lr_wsd_decay_style", RoundTrip<LrWsdDecayStyle>},
      {"recompute_granularity", RoundTrip<RecomputeGranularity>},
      {"recompute_method", RoundTrip<RecomputeMethod>},
      {"moe_router_score_function", RoundTrip<MoeRouterScoreFunction>},
      {"moe_router_load_balancing_type", RoundTrip<MoeLoadBalancingType>},
      {"moe_token_drop_policy", RoundTrip<MoeTokenDropPolicy>},
      {"moe_token_dispatcher_type", RoundTrip<MoeTokenDispatcherType>},
      {"moe_router_dtype", RoundTrip<MoeRouterDtype>},
  };
  int fields = 0;
  for (const FlagField& f : AllFlagFields()) {
    const std::vector<std::string> choices = FieldChoices(*f.field);
    if (choices.empty()) continue;
    const std::string& name = f.field->name();
    SCOPED_TRACE(name);
    if (name == "pipeline_schedule") {
      // The schedule registry maps these names; empty is resolved to one of them.
      for (const std::string& choice : choices) {
        if (!choice.empty()) {
          EXPECT_TRUE(pipeline::ScheduleByName(choice).ok()) << choice;
        }
      }
      continue;
    }
    if (name == "tokenizer_type") continue;  // data/tokenizer_factory maps these
    const auto it = enums.find(name);
    if (it == enums.end()) {
      ADD_FAILURE() << FlagName(*f.field) << " has (choices) but no enum in proto/config_choices.h";
      continue;
    }
    ++fields;
    std::set<int> values;
    for (const std::string& choice : choices) {
      const int value = it->second(choice);
      EXPECT_GE(value, 0) << "'" << choice << "' has no enum value";
      values.insert(value);
    }
    EXPECT_EQ(values.size(), choices.size()) << "two choices share an enum value";
  }
  EXPECT_EQ(fields, static_cast<int>(enums.size())) << "an enum for a field without (choices)";
  EXPECT_FALSE(ParseChoice<Normalization>("rmsnorm").has_value());
}

ResolvedConfig Resolve(const std::vector<std::string>& flags, int world_size) {
  std::vector<std::string> args = {"--mock-data", "--vocab-size", "100", "--num-layers", "8"};
  args.insert(args.end(), flags.begin(), flags.end());
  const absl::StatusOr<Config> parsed = ParseFlags(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, world_size);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

TEST(ResolvedConfigTest, DerivesTheSizesOfTheLayout) {
  const ResolvedConfig one = Resolve({}, 1);
  EXPECT_EQ(one.world_size(), 1);
  EXPECT_EQ(one.tp(), 1);
  EXPECT_EQ(one.pp(), 1);
  EXPECT_EQ(one.dp(), 1);
  EXPECT_EQ(one.virtual_stages(), 1);
  EXPECT_EQ(one.micro_batches(), 1);

  // TP 2 x PP 2 x DP 2; global batch 32 = M 4 x micro-batch 4 x DP 2.
  const ResolvedConfig eight =
      Resolve({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
               "--micro-batch-size", "4", "--global-batch-size", "32"},
              8);
  EXPECT_EQ(eight.world_size(), 8);
  EXPECT_EQ(eight.tp(), 2);
  EXPECT_EQ(eight.pp(), 2);
  EXPECT_EQ(eight.dp(), 2);
  EXPECT_EQ(eight.virtual_stages(), 1);
  EXPECT_EQ(eight.micro_batches(), 4);
  EXPECT_EQ(eight.config().training().num_micro_batches(), 4);
  EXPECT_EQ(eight.padded_vocab_size(), PaddedVocabSize(eight.config()));
  EXPECT_EQ(eight.padded_vocab_size(), 256);  // 100 up to a multiple of 128 x TP 2

  // PP 4 x DP 3; 8 layers / PP 4 = 2 per rank, 1 per virtual stage: V 2.
  const ResolvedConfig interleaved =
      Resolve({"--pipeline-model-parallel-size", "4", "--num-layers-per-virtual-pipeline-stage",
               "1", "--num-micro-batches", "8"},
              12);
  EXPECT_EQ(interleaved.dp(), 3);
  EXPECT_EQ(interleaved.virtual_stages(), 2);
  EXPECT_EQ(interleaved.micro_batches(), 8);
  EXPECT_EQ(interleaved.config().parallel().pipeline_schedule(), "interleaved-1f1b");
  EXPECT_EQ(interleaved.config().training().global_batch_size(), 8 * 1 * 3);
}

TEST(ResolvedConfigTest, HoldsTheChoicesAsEnums) {
  const ResolvedConfig defaults = Resolve({}, 1);
  EXPECT_EQ(defaults.device(), DeviceKind::kAuto);
  EXPECT_FALSE(defaults.on_gpu());
  EXPECT_EQ(defaults.nan_policy(), NanPolicy::kStop);
  EXPECT_EQ(defaults.optimizer(), OptimizerKind::kAdam);
  EXPECT_EQ(defaults.lr_decay_style(), LrDecayStyle::kLinear);
  EXPECT_EQ(defaults.position_embedding_type(), PositionEmbeddingType::kLearnedAbsolute);
  EXPECT_EQ(defaults.normalization(), Normalization::kLayerNorm);
  EXPECT_EQ(defaults.recompute_granularity(), RecomputeGranularity::kNone);
  EXPECT_EQ(defaults.recompute_method(), RecomputeMethod::kNone);

  const ResolvedConfig set =
      Resolve({"--device", "cuda", "--nan-policy", "skip", "--optimizer", "sgd", "--lr-decay-style",
               "inverse-square-root", "--position-embedding-type", "rope", "--normalization",
               "RMSNorm", "--recompute-granularity", "full", "--recompute-method", "block",
               "--recompute-num-layers", "1"},
              1);
  EXPECT_EQ(set.device(), DeviceKind::kCuda);
  EXPECT_TRUE(set.on_gpu());
  EXPECT_TRUE(set.config().precision().bf16());  // derived from --device cuda
  EXPECT_EQ(set.nan_policy(), NanPolicy::kSkip);
  EXPECT_EQ(set.optimizer(), OptimizerKind::kSgd);
  EXPECT_EQ(set.lr_decay_style(), LrDecayStyle::kInverseSquareRoot);
  EXPECT_EQ(set.position_embedding_type(), PositionEmbeddingType::kRope);
  EXPECT_EQ(set.normalization(), Normalization::kRmsNorm);
  EXPECT_EQ(set.recompute_granularity(), RecomputeGranularity::kFull);
  EXPECT_EQ(set.recompute_method(), RecomputeMethod::kBlock);

  // --recompute-activations resolves to selective.
  EXPECT_EQ(Resolve({"--recompute-activations"}, 1).recompute_granularity(),
            RecomputeGranularity::kSelective);
}

TEST(ResolvedConfigTest, FixesTheVocabularyAndResolvesToItself) {
  const ResolvedConfig bytes = Resolve({"--tokenizer-type", "ByteTokenizer"}, 2);
  EXPECT_NE(bytes.config().model().vocab_size(), 100);  // the tokenizer's, not --vocab-size
  EXPECT_EQ(bytes.padded_vocab_size(), PaddedVocabSize(bytes.config()));
  const absl::StatusOr<ResolvedConfig> again = ResolvedConfig::Resolve(bytes.config(), 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->config().SerializeAsString(), bytes.config().SerializeAsString());
  EXPECT_EQ(again->dp(), 2);
}

// Megatron's pretrain_gpt.py: --tokenizer-type defaults to GPT2BPETokenizer, so a
// command line with GPT-2's vocab.json and merges.txt and no type trains on GPT-2's
// 50257 tokens.
TEST(ResolvedConfigTest, GptFilesWithoutATypeAreMegatronsGpt2BpeTokenizer) {
  const std::string gpt2 = testing_util::TestDataDir() + "/gpt2/";
  const absl::StatusOr<Config> parsed =
      ParseFlags({"--mock-data", "--vocab-file", gpt2 + "vocab.json", "--merge-file",
                  gpt2 + "merges.txt", "--make-vocab-size-divisible-by", "128"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, 1);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->config().data().tokenizer_type(), "GPT2BPETokenizer");
  EXPECT_EQ(resolved->config().model().vocab_size(), 50257);
  // Megatron's _vocab_size_with_padding: while after % (divisible_by * TP): after += 1.
  int64_t padded = 50257;
  while (padded % (128 * 1) != 0) ++padded;
  EXPECT_EQ(padded, 50304);
  EXPECT_EQ(resolved->padded_vocab_size(), padded);
  // The effective config names the tokenizer, and resolves to itself.
  EXPECT_THAT(FormatEffectiveConfig(resolved->config()), HasSubstr("GPT2BPETokenizer"));
  const absl::StatusOr<ResolvedConfig> again = ResolvedConfig::Resolve(resolved->config(), 1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->config().SerializeAsString(), resolved->config().SerializeAsString());
}

// One of the two files without a type is refused naming the missing one (exit 2 at the
// command line), not with "--vocab-size 0 must be positive".
TEST(ResolvedConfigTest, OneGptFileWithoutATypeNamesTheOther) {
  const std::string gpt2 = testing_util::TestDataDir() + "/gpt2/";
  for (const auto& [given, path, missing] :
       {std::tuple{"--vocab-file", "vocab.json", "--merge-file"},
        std::tuple{"--merge-file", "merges.txt", "--vocab-file"}}) {
    SCOPED_TRACE(given);
    const absl::StatusOr<Config> parsed = ParseFlags({"--mock-data", given, gpt2 + path});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, 1);
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(resolved.status().message(),
                HasSubstr(absl::StrCat(missing, " is missing: without --tokenizer-type")));
    EXPECT_THAT(resolved.status().message(), Not(HasSubstr("--vocab-size")));
  }
}

TEST(ResolvedConfigTest, ReportsAnInvalidConfig) {
  const absl::StatusOr<Config> parsed =
      ParseFlags({"--mock-data", "--vocab-size", "100", "--tensor-model-parallel-size", "3"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, 4);
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resolved.status().message(), HasSubstr("--tensor-model-parallel-size 3"));
}

}  // namespace
}  // namespace conveyor
