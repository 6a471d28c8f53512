// The tools' tokenizer flags are the trainer's settings themselves: preprocess and
// inspect_data take proto/config.proto's DataConfig fields through a (flag_fields)
// option, so that each tokenizer setting has one declaration (type, default, choices,
// help) for all three programs.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "flags/proto_flags.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "proto/tools.pb.h"

namespace conveyor {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// The flags a tool's message takes from a message field, by that field.
std::vector<const FieldDescriptor*> FlagsFrom(const Descriptor& tool, const std::string& group) {
  std::vector<const FieldDescriptor*> out;
  for (const FlagField& f : CollectFlagFields(tool, /*grouped=*/false)) {
    if (f.group != nullptr && f.group->name() == group) out.push_back(f.field);
  }
  return out;
}

TEST(ToolFlagsTest, TokenizerFlagsAreTheTrainersDataConfigFields) {
  for (const Descriptor* tool :
       {tools::PreprocessOptions::descriptor(), tools::InspectDataOptions::descriptor()}) {
    const FieldDescriptor& group = *tool->FindFieldByName("tokenizer");
    const std::vector<std::string> names =
        absl::StrSplit(group.options().GetExtension(flag_fields), ',');
    const std::vector<const FieldDescriptor*> flags = FlagsFrom(*tool, "tokenizer");
    // Every name the option lists is a field of DataConfig (none silently left out).
    ASSERT_EQ(flags.size(), names.size()) << tool->name();
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(flags[i], DataConfig::descriptor()->FindFieldByName(names[i]))
          << tool->name() << " " << names[i];
    }
    // The flags a tool declares itself do not repeat them.
    std::set<std::string> own;
    for (int f = 0; f < tool->field_count(); ++f) own.insert(tool->field(f)->name());
    for (const std::string& name : names) EXPECT_EQ(own.count(name), 0u) << name;
  }
}

TEST(ToolFlagsTest, TokenizerFlagsParseIntoTheNestedSettings) {
  FlagSpec spec;
  spec.fields = CollectFlagFields(*tools::PreprocessOptions::descriptor(), /*grouped=*/false);
  tools::PreprocessOptions options;
  std::set<const FieldDescriptor*> given;
  const std::vector<std::string> problems =
      ParseFlagsInto(spec,
                     {"--input", "in.jsonl", "--tokenizer-type", "TikTokenizer",
                      "--tiktoken-pattern=v2", "--vocab-size", "131072"},
                     &options, &given);
  ASSERT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(options.input(), "in.jsonl");
  EXPECT_EQ(options.vocab_size(), 131072);
  EXPECT_EQ(options.tokenizer().tokenizer_type(), "TikTokenizer");
  EXPECT_EQ(options.tokenizer().tiktoken_pattern(), "v2");
  EXPECT_TRUE(options.tokenizer().has_tiktoken_pattern());
  EXPECT_FALSE(options.tokenizer().has_vocab_extra_ids());
  EXPECT_EQ(given.count(DataConfig::descriptor()->FindFieldByName("tokenizer_type")), 1u);
  // DataConfig's fields that are not the tools' flags stay unknown to them.
  tools::PreprocessOptions other;
  const std::vector<std::string> refused =
      ParseFlagsInto(spec, {"--eval-iters", "3"}, &other, nullptr);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("unknown flag --eval-iters"), std::string::npos) << refused[0];
  // A choice outside DataConfig's list is refused as the trainer refuses it.
  const std::vector<std::string> wrong =
      ParseFlagsInto(spec, {"--tokenizer-type", "Gpt2"}, &other, nullptr);
  ASSERT_EQ(wrong.size(), 1u);
  EXPECT_NE(wrong[0].find("--tokenizer-type"), std::string::npos) << wrong[0];
}

}  // namespace
}  // namespace conveyor
