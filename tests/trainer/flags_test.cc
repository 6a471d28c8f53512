#include "trainer/config/flags.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using google::protobuf::FieldDescriptor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

// Writes a file under the test's temporary folder and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = testing_util::TestTmpDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

// The error lines of a failed parse.
std::vector<std::string> Problems(const std::vector<std::string>& args) {
  const absl::StatusOr<Config> config = ParseFlags(args);
  EXPECT_FALSE(config.ok()) << "expected an error for these args";
  if (config.ok()) return {};
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return absl::StrSplit(config.status().message(), '\n');
}

std::string Problem(const std::vector<std::string>& args) {
  const std::vector<std::string> lines = Problems(args);
  EXPECT_THAT(lines, SizeIs(1));
  return lines.empty() ? "" : lines[0];
}

TEST(FlagNameTest, ReplacesUnderscores) {
  EXPECT_EQ(
      FlagName(*ParallelConfig::descriptor()->FindFieldByName("pipeline_model_parallel_size")),
      "--pipeline-model-parallel-size");
}

TEST(FlagsTest, NoArgsGiveProtoDefaults) {
  const absl::StatusOr<Config> config = ParseFlags({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equivalent(*config, Config()));
  EXPECT_EQ(config->model().num_layers(), 2);
  EXPECT_EQ(config->model().hidden_size(), 128);
  EXPECT_FLOAT_EQ(config->optimizer().lr(), 1e-4f);
  EXPECT_EQ(config->model().position_embedding_type(), "learned_absolute");
  EXPECT_EQ(config->data().split(), "969,30,1");
  EXPECT_FALSE(config->model().swiglu());
}

TEST(FlagsTest, AcceptsSpaceAndEqualsSyntax) {
  const absl::StatusOr<Config> config =
      ParseFlags({"--num-layers", "4", "--hidden-size=256", "--lr", "3e-4", "--min-lr=1e-5",
                  "--position-embedding-type=rope", "--seed", "-5", "--save", "/ckpt",
                  "--pipeline-schedule="});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model().num_layers(), 4);
  EXPECT_EQ(config->model().hidden_size(), 256);
  EXPECT_FLOAT_EQ(config->optimizer().lr(), 3e-4f);
  EXPECT_FLOAT_EQ(config->optimizer().min_lr(), 1e-5f);
  EXPECT_EQ(config->model().position_embedding_type(), "rope");
  EXPECT_EQ(config->training().seed(), -5);
  EXPECT_EQ(config->checkpoint().save(), "/ckpt");
  EXPECT_EQ(config->parallel().pipeline_schedule(), "");
}

TEST(FlagsTest, LaterFlagsWin) {
  const absl::StatusOr<Config> config = ParseFlags({"--num-layers", "4", "--num-layers=6"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model().num_layers(), 6);
}

TEST(FlagsTest, Bools) {
  absl::StatusOr<Config> config = ParseFlags({"--swiglu", "--bf16=1", "--mock-data=true"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->model().swiglu());
  EXPECT_TRUE(config->precision().bf16());
  EXPECT_TRUE(config->data().mock_data());

  config = ParseFlags({"--swiglu", "--swiglu=false", "--bf16=0"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->model().swiglu());
  EXPECT_FALSE(config->precision().bf16());
  EXPECT_TRUE(config->model().has_swiglu());  // explicitly set, not just defaulted

  EXPECT_THAT(Problem({"--swiglu=maybe"}), HasSubstr("--swiglu expects true, false, 1 or 0"));
  // A separate value is not taken (Megatron's store_true); say how to write it.
  EXPECT_THAT(Problem({"--swiglu", "false"}), HasSubstr("--swiglu=false"));
}

TEST(FlagsTest, RepeatedTakesValuesUntilNextFlag) {
  absl::StatusOr<Config> config =
      ParseFlags({"--data-path", "0.3", "a", "0.7", "b", "--num-layers", "3"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->data().data_path(), ElementsAre("0.3", "a", "0.7", "b"));
  EXPECT_EQ(config->model().num_layers(), 3);

  // Each occurrence replaces the list; --flag=v is one value.
  config = ParseFlags({"--data-path", "a", "b", "--data-path=c", "--recompute-modules", "mlp"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->data().data_path(), ElementsAre("c"));
  EXPECT_THAT(config->recompute().recompute_modules(), ElementsAre("mlp"));

  // No values clears the list.
  config = ParseFlags({"--data-path", "a", "--data-path", "--lr", "1"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->data().data_path(), IsEmpty());
}

TEST(FlagsTest, ConfigFileMergesInOrder) {
  const std::string path = WriteTempFile("merge.textproto",
                                         "# a comment\n"
                                         "model { num_layers: 6 hidden_size: 512 }\n"
                                         "data { data_path: \"f1\" data_path: \"f2\" }\n");
  const absl::StatusOr<Config> config =
      ParseFlags({"--hidden-size", "64", "--data-path", "x", "--seq-length", "32", "--config", path,
                  "--num-layers", "8"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model().hidden_size(), 512);  // earlier flag overwritten by the file
  EXPECT_EQ(config->model().num_layers(), 8);     // later flag overwrites the file
  EXPECT_EQ(config->model().seq_length(), 32);    // not in the file: kept
  EXPECT_THAT(config->data().data_path(), ElementsAre("f1", "f2"));  // replaced, not appended
  EXPECT_EQ(config->model().num_attention_heads(), 4);               // default

  const absl::StatusOr<Config> equals_form = ParseFlags({"--config=" + path});
  ASSERT_TRUE(equals_form.ok()) << equals_form.status();
  EXPECT_EQ(equals_form->model().num_layers(), 6);
}

TEST(FlagsTest, ConfigFileProblemsNameTheFile) {
  const std::string missing = testing_util::TestTmpDir() + "/nope.textproto";
  std::string problem = Problem({"--config", missing});
  EXPECT_THAT(problem, HasSubstr("--config"));
  EXPECT_THAT(problem, HasSubstr(missing));

  const std::string bad = WriteTempFile("bad.textproto", "model {\n  num_layers: abc\n}\n");
  problem = Problem({"--config", bad});
  EXPECT_THAT(problem, HasSubstr(bad + ":2:"));  // line:col of the parser

  const std::string unknown = WriteTempFile("unknown.textproto", "model { num_layer: 3 }\n");
  EXPECT_THAT(Problem({"--config", unknown}), HasSubstr("num_layer"));

  EXPECT_THAT(Problem({"--config"}), HasSubstr("--config is missing its value"));
}

TEST(FlagsTest, UnknownFlagSuggestsClosest) {
  EXPECT_THAT(Problem({"--num-layer", "3"}), HasSubstr("did you mean --num-layers?"));
  EXPECT_THAT(Problem({"--hiden-size", "3"}), HasSubstr("did you mean --hidden-size?"));
  EXPECT_THAT(Problem({"--num_attention_heads", "3"}),
              HasSubstr("did you mean --num-attention-heads?"));
  EXPECT_THAT(Problem({"-num-layers", "3"}), HasSubstr("did you mean --num-layers?"));
  EXPECT_THAT(Problem({"--confg", "x"}), HasSubstr("did you mean --config?"));
  EXPECT_THAT(Problem({"--seq-lenght", "3"}), HasSubstr("did you mean --seq-length?"));
  EXPECT_THAT(Problem({"--numlayers", "3"}), HasSubstr("did you mean --num-layers?"));
  // Megatron's flags Conveyor answers without a field are suggested too.
  EXPECT_THAT(Problem({"--determinstic-mode"}), HasSubstr("did you mean --deterministic-mode?"));
  const std::string far = Problem({"--xyzzy"});
  EXPECT_THAT(far, HasSubstr("unknown flag --xyzzy"));
  EXPECT_THAT(far, Not(HasSubstr("did you mean")));
}

// A suggestion is a flag of the same words misspelt: a word more, less or replaced means
// something else, however close the spelling.
TEST(FlagsTest, NoSuggestionOfAnotherMeaning) {
  for (const char* flag : {"--ntp-num-layers", "--moe-router-dtypo", "--moe-router-type",
                           "--model-paralel-sizes", "--num-layers-total", "--layers",
                           "--hidden-sizes-x"}) {
    const std::string problem = Problem({flag, "3"});
    EXPECT_THAT(problem, Not(HasSubstr("did you mean --num-layers"))) << flag;
    EXPECT_THAT(problem, Not(HasSubstr("did you mean --moe-router-topk"))) << flag;
    EXPECT_THAT(problem, Not(HasSubstr("did you mean --context-parallel-size"))) << flag;
    EXPECT_THAT(problem, Not(HasSubstr("did you mean --hidden-size"))) << flag;
  }
  EXPECT_THAT(Problem({"--model-paralel-size", "2"}),
              HasSubstr("did you mean --model-parallel-size?"));
  // The same words misspelt: multi-token prediction's flag.
  EXPECT_EQ(Problem({"--ntp-num-layers", "3"}),
            "unknown flag --ntp-num-layers: did you mean --mtp-num-layers?");
}

// A switch given a value the way a flag is: Megatron's form, and this parser's.
TEST(FlagsTest, ASwitchGivenAValueGetsMegatronsForm) {
  EXPECT_EQ(Problem({"--swiglu", "false"}),
            "unexpected argument 'false' after --swiglu: --swiglu is a switch, given alone as in "
            "Megatron (--swiglu=false sets it here)");
}

TEST(FlagsTest, MegatronFlagsWithoutCounterpartSayWhatToDo) {
  EXPECT_EQ(Problem({"--disable-dsa-indexer-rotate-activation"}),
            "--disable-dsa-indexer-rotate-activation: DeepSeek sparse attention is not "
            "implemented");
  EXPECT_THAT(Problem({"--disable_dsa_indexer_rotate_activation"}),
              HasSubstr("DeepSeek sparse attention is not implemented"));
  // Not "did you mean --max-position-embeddings?".
  EXPECT_THAT(Problem({"--no-position-embedding"}), HasSubstr("--position-embedding-type"));
}

TEST(FlagsTest, WrongTypeNamesTheFlag) {
  EXPECT_EQ(Problem({"--num-layers", "abc"}), "--num-layers expects an integer, got 'abc'");
  EXPECT_THAT(Problem({"--num-layers", "1.5"}), HasSubstr("--num-layers expects an integer"));
  EXPECT_THAT(Problem({"--num-layers", "12abc"}), HasSubstr("--num-layers expects an integer"));
  EXPECT_THAT(Problem({"--num-layers="}), HasSubstr("--num-layers expects an integer"));
  EXPECT_THAT(Problem({"--lr", "fast"}), HasSubstr("--lr expects a number, got 'fast'"));
  EXPECT_THAT(Problem({"--lr", "nan"}), HasSubstr("--lr expects a finite number"));
  EXPECT_THAT(Problem({"--lr", "1e40"}), HasSubstr("out of range for float"));
  EXPECT_THAT(Problem({"--seed", "99999999999999999999"}), HasSubstr("--seed"));
}

TEST(FlagsTest, Int32Range) {
  EXPECT_THAT(Problem({"--num-layers", "3000000000"}),
              HasSubstr("--num-layers 3000000000 is out of range for int32"));
  const absl::StatusOr<Config> config = ParseFlags({"--seed", "3000000000"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->training().seed(), 3000000000);
}

TEST(FlagsTest, MissingValue) {
  EXPECT_THAT(Problem({"--num-layers"}), HasSubstr("--num-layers is missing its value"));
  EXPECT_THAT(Problem({"--num-layers", "--lr", "1"}),
              HasSubstr("--num-layers is missing its value"));
}

TEST(FlagsTest, ChoicesAreChecked) {
  const std::string problem = Problem({"--normalization", "layernorm"});
  EXPECT_THAT(problem, HasSubstr("--normalization"));
  EXPECT_THAT(problem, HasSubstr("LayerNorm, RMSNorm"));
  EXPECT_THAT(Problem({"--recompute-granularity=some"}), HasSubstr("\"\", full, selective"));
}

TEST(FlagsTest, StrayValueIsReported) {
  EXPECT_THAT(Problem({"train.py"}), HasSubstr("unexpected argument 'train.py'"));
}

TEST(FlagsTest, ReportsEveryProblemAtOnce) {
  const std::vector<std::string> lines =
      Problems({"--num-layer", "2", "--hidden-size", "x", "--normalization", "foo", "--num-layers",
                "1.5", "--lr"});
  ASSERT_THAT(lines, SizeIs(5));
  EXPECT_THAT(lines[0], HasSubstr("--num-layers?"));
  EXPECT_THAT(lines[1], HasSubstr("--hidden-size"));
  EXPECT_THAT(lines[2], HasSubstr("--normalization"));
  EXPECT_THAT(lines[3], HasSubstr("--num-layers"));
  EXPECT_THAT(lines[4], HasSubstr("--lr is missing its value"));
}

TEST(FlagsTest, HelpIsSkippedByParseAndFoundByWantsHelp) {
  EXPECT_TRUE(WantsHelp({"--num-layers", "2", "--help"}));
  EXPECT_TRUE(WantsHelp({"-h"}));
  EXPECT_FALSE(WantsHelp({"--num-layers", "2"}));
  EXPECT_TRUE(ParseFlags({"--help", "-h"}).ok());
}

TEST(FlagsTest, HelpListsEveryFlagWithGroupAndDefault) {
  const std::string help = FlagHelp();
  for (const FlagField& f : AllFlagFields()) {
    EXPECT_THAT(help, HasSubstr(FlagName(*f.field) + " ")) << f.field->full_name();
    const std::string title = f.group->message_type()->options().GetExtension(group_title);
    EXPECT_THAT(help, HasSubstr("\n" + title + ":\n")) << f.group->name();
  }
  EXPECT_THAT(help, HasSubstr("--config FILE.textproto"));
  EXPECT_THAT(help, HasSubstr("--help, -h"));
  EXPECT_THAT(help,
              HasSubstr("--num-layers INT  (default: 2)\n      Number of transformer layers."));
  EXPECT_THAT(help, HasSubstr("--normalization {LayerNorm|RMSNorm}  (default: LayerNorm)"));
  EXPECT_THAT(help, HasSubstr("--pipeline-schedule {\"\"|gpipe|"));
  EXPECT_THAT(help, HasSubstr("--lr FLOAT  (default: 0.0001)"));
  EXPECT_THAT(help, HasSubstr("--swiglu [=true|false]  (default: false)"));
  EXPECT_THAT(help, HasSubstr("--data-path STRING ..."));
}

// Guards proto/config.proto edits: flags are not prefixed by their group.
TEST(ConfigSchemaTest, FieldNamesAreUniqueAcrossGroups) {
  std::set<std::string> names;
  for (const FlagField& f : AllFlagFields()) {
    EXPECT_TRUE(names.insert(f.field->name()).second)
        << f.field->full_name() << " repeats a field name of another group";
  }
  EXPECT_FALSE(names.count("config")) << "--config is reserved";
  EXPECT_FALSE(names.count("help")) << "--help is reserved";
}

TEST(ConfigSchemaTest, ConfigHoldsOnlyGroupsAndEveryFieldIsDocumented) {
  const google::protobuf::Descriptor& config = *Config::descriptor();
  int leaf_count = 0;
  for (int g = 0; g < config.field_count(); ++g) {
    const FieldDescriptor& group = *config.field(g);
    ASSERT_EQ(group.cpp_type(), FieldDescriptor::CPPTYPE_MESSAGE) << group.name();
    EXPECT_FALSE(group.message_type()->options().GetExtension(group_title).empty())
        << group.name() << " has no (group_title)";
    leaf_count += group.message_type()->field_count();
  }
  EXPECT_EQ(leaf_count, static_cast<int>(AllFlagFields().size()));
  for (const FlagField& f : AllFlagFields()) {
    EXPECT_NE(f.field->cpp_type(), FieldDescriptor::CPPTYPE_MESSAGE) << f.field->full_name();
    EXPECT_FALSE(f.field->options().GetExtension(help).empty())
        << f.field->full_name() << " has no (help)";
    const std::vector<std::string> choices = FieldChoices(*f.field);
    if (choices.empty()) continue;
    EXPECT_EQ(f.field->cpp_type(), FieldDescriptor::CPPTYPE_STRING) << f.field->full_name();
    if (!f.field->is_repeated()) {
      EXPECT_THAT(choices, ::testing::Contains(f.field->default_value_string()))
          << f.field->full_name() << "'s default is not one of its (choices)";
    }
  }
}

// Every field is reachable through its flag, by reflection, whatever its type.
TEST(FlagsTest, EveryFieldCanBeSetByItsFlag) {
  for (const FlagField& f : AllFlagFields()) {
    const FieldDescriptor& field = *f.field;
    std::string value;
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        value = "true";
        break;
      case FieldDescriptor::CPPTYPE_STRING: {
        const std::vector<std::string> choices = FieldChoices(field);
        value = choices.empty() ? "some-text" : choices.back();
        break;
      }
      default:
        value = "7";
    }
    const absl::StatusOr<Config> config = ParseFlags({FlagName(field) + "=" + value});
    ASSERT_TRUE(config.ok()) << config.status();
    const google::protobuf::Message& group = config->GetReflection()->GetMessage(*config, f.group);
    if (field.is_repeated()) {
      EXPECT_EQ(group.GetReflection()->FieldSize(group, &field), 1) << field.full_name();
    } else {
      EXPECT_TRUE(group.GetReflection()->HasField(group, &field)) << field.full_name();
    }
  }
}

}  // namespace
}  // namespace conveyor
