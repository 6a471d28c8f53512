// Every flag of Megatron-LM's argument parser has an answer here
// (trainer/config/megatron_flag_table.h): implemented, a warned no-op, an alias, or refused
// with its reason. The list of Megatron's flags is tests/testdata/megatron/flags.tsv,
// copied from Megatron-LM's megatron/training/arguments.py at d98e8a64.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "trainer/config/flags.h"
#include "trainer/config/megatron_flag_table.h"
#include "trainer/config/megatron_flags_not_here.h"

namespace conveyor {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string Problem(const std::vector<std::string>& args) {
  const absl::StatusOr<Config> parsed = ParseFlags(args);
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

const FlagField* FieldNamed(const std::string& flag) {
  for (const FlagField& f : AllFlagFields()) {
    if (FlagName(*f.field) == flag) return &f;
  }
  return nullptr;
}

// A value Conveyor's parser accepts for the field.
std::string ValidValue(const FieldDescriptor& field) {
  const std::vector<std::string> choices = FieldChoices(field);
  for (const std::string& c : choices) {
    if (!c.empty()) return c;
  }
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return "0.5";
    case FieldDescriptor::CPPTYPE_STRING:
      return "x";
    case FieldDescriptor::CPPTYPE_ENUM:
      return field.enum_type()->value(0)->name();
    default:
      return "2";
  }
}

struct MegatronFlag {
  std::string flag;
  bool takes_value;
};

std::vector<MegatronFlag> ReadFlagsTsv() {
  const std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                                        std::getenv("TEST_WORKSPACE"),
                                        "/tests/testdata/megatron/flags.tsv");
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<MegatronFlag> flags;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || absl::StartsWith(line, "flag\t")) continue;
    const std::vector<std::string> columns = absl::StrSplit(line, '\t');
    EXPECT_GE(columns.size(), 2) << line;
    if (columns.size() >= 2) flags.push_back({columns[0], columns[1] == "value"});
  }
  return flags;
}

// Given alone (with a value where Megatron's flag takes one), each of Megatron's 865
// flags is implemented, a warned no-op or an alias, or refused naming the flag and its
// reason: never "unknown flag", never another flag's "did you mean".
TEST(MegatronFlagsTest, EveryMegatronFlagHasAnAnswer) {
  const std::vector<MegatronFlag> flags = ReadFlagsTsv();
  ASSERT_EQ(flags.size(), 865);
  std::map<std::string, int> answers;
  for (const MegatronFlag& m : flags) {
    const std::string dashed = absl::StrReplaceAll(m.flag, {{"_", "-"}});
    const FlagField* field = FieldNamed(dashed);
    const MegatronFlagEntry entry = FindMegatronFlag(dashed);
    std::vector<std::string> args = {m.flag};
    if (field != nullptr) {
      const bool is_switch = field->field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL &&
                             !field->field->is_repeated();
      // Megatron's form must parse: its switches are switches here, its values values.
      EXPECT_EQ(is_switch, !m.takes_value) << m.flag;
      if (m.takes_value) args.push_back(ValidValue(*field->field));
    } else if (m.takes_value) {
      const bool only = entry.group != nullptr && !entry.group->only_value.empty();
      args.push_back(only ? std::string(entry.group->only_value) : "1");
    }
    std::vector<std::string> ignored;
    const absl::StatusOr<Config> parsed = ParseFlags(args, &ignored);
    const std::string message = parsed.ok() ? "" : std::string(parsed.status().message());
    EXPECT_THAT(message, Not(HasSubstr("unknown flag"))) << m.flag;
    EXPECT_THAT(message, Not(HasSubstr("did you mean"))) << m.flag;
    if (field != nullptr) {
      EXPECT_TRUE(parsed.ok()) << m.flag << ": " << message;
      ++answers["implemented"];
    } else if (entry.group == nullptr) {
      // Only Megatron's store_false spelling of a Conveyor switch ("--no-X").
      EXPECT_TRUE(parsed.ok()) << m.flag << ": " << message;
      EXPECT_TRUE(absl::StartsWith(dashed, "--no-")) << m.flag;
      ++answers["implemented"];
    } else if (parsed.ok()) {
      EXPECT_NE(entry.group->answer, MegatronAnswer::kRefused) << m.flag;
      if (entry.group->answer == MegatronAnswer::kNoOp) {
        EXPECT_THAT(ignored, ElementsAre(absl::StrJoin(args, " "))) << m.flag;
      }
      ++answers[entry.group->answer == MegatronAnswer::kNoOp ? "no-op" : "alias"];
    } else {
      // Refused: the flag is named, with the group's reason.
      EXPECT_THAT(message, HasSubstr(m.flag)) << message;
      EXPECT_THAT(message, HasSubstr(entry.group->reason)) << m.flag;
      ++answers["refused"];
    }
  }
  for (const auto& [answer, count] : answers) std::cout << answer << ": " << count << "\n";
}

// The table's value counts are Megatron's: a switch given a value, or a flag given none,
// would otherwise be misread.
TEST(MegatronFlagsTest, TheTableTakesValuesAsMegatronDoes) {
  for (const MegatronFlag& m : ReadFlagsTsv()) {
    const MegatronFlagEntry entry = FindMegatronFlag(absl::StrReplaceAll(m.flag, {{"_", "-"}}));
    if (entry.values == MegatronFlagEntry::Values::kUnstated) continue;
    EXPECT_EQ(entry.values != MegatronFlagEntry::Values::kNone, m.takes_value) << m.flag;
  }
}

// A flag that became a Conveyor flag must leave the table (the parser would still take
// it, but the table would then describe a flag that no longer exists as it says).
TEST(MegatronFlagsTest, NoConveyorFlagIsInTheTable) {
  for (const FlagField& f : AllFlagFields()) {
    const std::string flag = FlagName(*f.field);
    EXPECT_EQ(FindMegatronFlag(flag).group, nullptr) << flag << " is in proto/config.proto and "
                                                     << "in trainer/config/megatron_flag_table.cc";
  }
  for (const MegatronFlagGroup& group : MegatronFlagGroups()) {
    EXPECT_FALSE(group.reason.empty()) << group.flags;
    if (group.only_with.empty()) continue;
    const std::vector<std::string> with = absl::StrSplit(group.only_with, ' ');
    EXPECT_NE(FieldNamed(with[0]), nullptr) << group.only_with;
  }
}

TEST(MegatronFlagsTest, NoOpsAreDroppedWithTheirValuesAndWarnedWithTheirReason) {
  std::vector<std::string> ignored;
  const absl::StatusOr<Config> parsed =
      ParseFlags({"--num-layers", "4", "--no-masked-softmax-fusion", "--transformer-impl", "local",
                  "--attention_backend=auto", "--wandb-project", "p", "--lr", "1e-3",
                  "--wandb-entity", "e", "--dataloader-type", "single", "--deterministic-mode"},
                 &ignored);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model().num_layers(), 4);
  EXPECT_THAT(ignored, ElementsAre("--no-masked-softmax-fusion", "--transformer-impl local",
                                   "--attention_backend auto", "--wandb-project p",
                                   "--wandb-entity e", "--dataloader-type single",
                                   "--deterministic-mode"));
  const std::vector<std::string> warnings = MegatronNoOpWarnings(ignored);
  ASSERT_EQ(warnings.size(), 6);
  EXPECT_EQ(warnings[0],
            "warning: Megatron's --no-masked-softmax-fusion changes nothing here: Conveyor fuses "
            "its kernels without changing the math and has no switch for it");
  EXPECT_THAT(warnings[3], HasSubstr("warning: Megatron's --wandb-project p, --wandb-entity e "
                                     "change nothing here: Conveyor writes no Weights & Biases "
                                     "logs, so nothing is written there"));
  EXPECT_THAT(warnings[5], HasSubstr("--deterministic-mode changes nothing here: Conveyor "
                                     "chooses no non-deterministic algorithm"));
  std::vector<std::string> none;
  ASSERT_TRUE(ParseFlags({"--num-layers", "3"}, &none).ok());
  EXPECT_THAT(none, IsEmpty());
}

// One line per feature, naming every flag of it the command line used.
TEST(MegatronFlagsTest, RefusalsAreGroupedByFeature) {
  EXPECT_EQ(Problem({"--dsa-indexer-n-heads", "64", "--num-layers", "2",
                     "--dsa_indexer_topk=2048", "--grpo-group-size", "8",
                     "--rl-use-sequence-packing", "true"}),
            "--dsa-indexer-n-heads, --dsa_indexer_topk: DeepSeek sparse attention is not "
            "implemented\n"
            "--grpo-group-size, --rl-use-sequence-packing: reinforcement learning is not part of "
            "Conveyor");
  EXPECT_EQ(Problem({"--fp8-format", "hybrid", "--fp8-param-gather"}),
            "--fp8-format, --fp8-param-gather: FP8 and FP4 training need a GPU path that has not "
            "run yet: Conveyor trains in bf16 (--bf16) or fp32");
  // A no-op at one value only is refused at the others, with its reason.
  EXPECT_EQ(Problem({"--dataloader-type", "cyclic"}),
            "--dataloader-type cyclic (a no-op at single only): Conveyor reads samples in "
            "Megatron's single order");
}

TEST(MegatronFlagsTest, ANoOpWithAConditionIsRefusedWhenItDoesNotHold) {
  std::vector<std::string> ignored;
  const absl::StatusOr<Config> rope =
      ParseFlags({"--no-position-embedding", "--position-embedding-type", "rope"}, &ignored);
  ASSERT_TRUE(rope.ok()) << rope.status();
  EXPECT_THAT(ignored, ElementsAre("--no-position-embedding"));
  EXPECT_THAT(Problem({"--no-position-embedding"}),
              HasSubstr("--no-position-embedding with --position-embedding-type learned_absolute: "
                        "with --position-embedding-type rope there is no learned position table"));
}

TEST(MegatronFlagsTest, AliasesBecomeTheConveyorFlag) {
  // Megatron's validate_args sets rope after parsing, whatever came before.
  const absl::StatusOr<Config> rope = ParseFlags(
      {"--use-rotary-position-embeddings", "--position-embedding-type", "learned_absolute"});
  ASSERT_TRUE(rope.ok()) << rope.status();
  EXPECT_EQ(rope->model().position_embedding_type(), "rope");
  const absl::StatusOr<Config> length = ParseFlags({"--encoder-seq-length", "2048"});
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(length->model().seq_length(), 2048);
  // "--no-X" of a Conveyor switch X is Megatron's store_false form.
  const absl::StatusOr<Config> no = ParseFlags({"--swiglu", "--no-swiglu"});
  ASSERT_TRUE(no.ok()) << no.status();
  EXPECT_FALSE(no->model().swiglu());
}

// A value of the wrong form is answered with Megatron's form.
TEST(MegatronFlagsTest, WrongFormsGetMegatronsForm) {
  EXPECT_EQ(Problem({"--deterministic-mode", "true"}),
            "unexpected value 'true' of --deterministic-mode: Megatron's --deterministic-mode is "
            "a switch, given alone");
  EXPECT_EQ(Problem({"--manual-gc=1"}),
            "unexpected value '1' of --manual-gc: Megatron's --manual-gc is a switch, given "
            "alone");
  EXPECT_EQ(Problem({"--num-workers", "--bf16"}),
            "--num-workers is missing its value: Megatron's form is --num-workers VALUE");
  EXPECT_EQ(Problem({"--cuda-graph-scope"}),
            "--cuda-graph-scope is missing its value: Megatron's form is --cuda-graph-scope "
            "VALUE [VALUE ...]");
}

}  // namespace
}  // namespace conveyor
