// Runs the inspect_data binary on the Megatron fixture: its samples must be
// the fixture's, in the fixture's order, and usage errors must exit 2.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadFileOrDie;
using ::conveyor::testing_util::ReadJsonOrDie;
using ::conveyor::testing_util::TestDataDir;
using ::testing::HasSubstr;
using ::testing::Not;

struct RunResult {
  int exit_code;
  std::string out, err;
};

RunResult InspectData(const std::string& args) {
  const std::string binary = absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                                          std::getenv("TEST_WORKSPACE"), "/data/inspect_data");
  const std::string dir = FreshDir("inspect_data");
  const int status =
      std::system(absl::StrCat(binary, " ", args, " >", dir, "/out 2>", dir, "/err").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFileOrDie(dir + "/out"),
          ReadFileOrDie(dir + "/err")};
}

std::string Fixture() { return TestDataDir() + "/megatron-fixtures/tiny_uint16"; }

TEST(InspectDataTest, SummaryAndSamplesMatchTheFixture) {
  const Json expected =
      ReadJsonOrDie(TestDataDir() + "/megatron-fixtures/gpt_tiny_uint16_seq16_seed1234_n40.json");
  // The fixture's request: 40 train samples, split 1,0,0, seed 1234.
  RunResult r = InspectData(absl::StrCat("--data-path ", Fixture(),
                                         " --split 1,0,0 --seq-length 16 --seed 1234"
                                         " --num-samples 40 --train-samples 40"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u + 40u) << r.out;
  EXPECT_EQ(lines[0], "dataset " + Fixture());
  EXPECT_EQ(lines[1], "  uint16, 7 documents, 7 sequences, 323 tokens, weight 1 (100.0%)");
  EXPECT_EQ(lines[2], "total: 1 dataset, 7 documents, 7 sequences, 323 tokens");
  EXPECT_EQ(lines[3],
            "train split: --split 1,0,0, --seq-length 16, --seed 1234, 40 samples requested, "
            "40 built");
  for (const Json& item : expected["samples"]["items"]) {
    const int64_t i = item["idx"].get<int64_t>();
    EXPECT_EQ(lines[4 + i],
              absl::StrCat("sample ", i, ": ", absl::StrJoin(item["tokens"].get<std::vector<int64_t>>(), " ")));
  }
}

// The shared parser takes --flag=value as well as --flag value, as the trainer does.
TEST(InspectDataTest, TakesFlagEqualsValue) {
  RunResult r = InspectData(absl::StrCat("--data-path=", Fixture(),
                                         " --split=1,0,0 --seq-length=16 --seed=1234"
                                         " --num-samples=2 --train-samples=40 --decode=false"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("train split: --split 1,0,0, --seq-length 16, --seed 1234, 40 "
                               "samples requested, 40 built"));
  EXPECT_THAT(r.out, HasSubstr("sample 1: "));
}

// --help lists the flags of InspectDataOptions (proto/tools.proto) with their help.
TEST(InspectDataTest, HelpComesFromTheProto) {
  RunResult r = InspectData("--help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("usage: inspect_data"));
  EXPECT_THAT(r.out, HasSubstr("--seq-length INT  (default: 128)"));
  EXPECT_THAT(r.out, HasSubstr("--tokenizer-type {\"\"|GPT2BPETokenizer|NullTokenizer|"
                               "ByteTokenizer|HuggingFaceTokenizer|SentencePieceTokenizer|"
                               "GPTSentencePieceTokenizer|Llama2Tokenizer|TikTokenizer}"));
  EXPECT_THAT(r.out, HasSubstr("Samples of the train split to print."));
}

TEST(InspectDataTest, DecodesWithTheGpt2Tokenizer) {
  const std::string gpt2 = TestDataDir() + "/gpt2";
  RunResult r = InspectData(
      absl::StrCat("--data-path 1 ", Fixture(), " 3 ", Fixture(),
                   " --split 1,0,0 --seq-length 16 --num-samples 2 --decode --tokenizer-type "
                   "GPT2BPETokenizer --vocab-file ",
                   gpt2, "/vocab.json --merge-file ", gpt2, "/merges.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("weight 1 (25.0%)"));
  EXPECT_THAT(r.out, HasSubstr("weight 3 (75.0%)"));
  EXPECT_THAT(r.out, HasSubstr("total: 2 datasets, 14 documents"));
  EXPECT_THAT(r.out, HasSubstr("sample 1: \""));
}

// A prefix with a space is one dataset, alone or in a weighted blend.
TEST(InspectDataTest, PrefixWithASpaceIsTakenWhole) {
  const std::string dir = FreshDir("inspect_data") + "/my data";
  std::filesystem::create_directories(dir);
  for (const char* ext : {".bin", ".idx"}) {
    std::filesystem::copy_file(Fixture() + ext, dir + "/tiny_uint16" + ext);
  }
  const std::string quoted = "'" + dir + "/tiny_uint16'";
  RunResult r = InspectData("--data-path " + quoted + " --split 1,0,0 --seq-length 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dataset " + dir + "/tiny_uint16\n  uint16, 7 documents"));
  r = InspectData("--data-path 0.3 " + quoted + " 0.7 " + Fixture() +
                  " --split 1,0,0 --seq-length 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dataset " + dir +
                               "/tiny_uint16\n  uint16, 7 documents, 7 "
                               "sequences, 323 tokens, weight 0.3 (30.0%)"));
  EXPECT_THAT(r.out, HasSubstr("total: 2 datasets, 14 documents"));
}

// An absurd request used to end in an uncaught std::bad_alloc.
TEST(InspectDataTest, TooManySamplesForMemoryIsAClearError) {
  RunResult r = InspectData("--data-path " + Fixture() +
                            " --split 1,0,0 --seq-length 16 --num-samples 1000000000000");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("inspect_data: --data-path " + Fixture() +
                               " (train split): the indices of 1000000000016 samples"));
  EXPECT_THAT(r.err, HasSubstr("need 23643.5 GiB of host memory, but this process may use "));
  EXPECT_THAT(r.err, HasSubstr("; the train split's sample count is --train-samples (default: "
                               "--num-samples): lower it, or run where this process may use "
                               "more memory"));
}

TEST(InspectDataTest, UsageErrorsExitTwo) {
  for (const char* args : {"", "--bogus", "--data-path", "--data-path x --seq-length zero",
                           "--data-path x --decode", "--data-path x --seq-length=0",
                           "--data-path x --tokenizer-type Bogus"}) {
    RunResult r = InspectData(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    // The problem alone, not the whole help after it (which pushed it off the screen).
    EXPECT_THAT(r.err, Not(HasSubstr("usage: inspect_data"))) << args;
  }
  EXPECT_THAT(InspectData("--bogus").err,
              HasSubstr("inspect_data: run with --help to list every flag"));
  EXPECT_THAT(InspectData("--data-path x --seq-lenght 16").err,
              HasSubstr("inspect_data: unknown flag --seq-lenght: did you mean --seq-length?"));
  // A data file that is not there is input to change: 2, as every refusal of input
  // (base/exit_code.h).
  RunResult missing = InspectData("--data-path /nonexistent/corpus");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/corpus.idx"));
}

}  // namespace
}  // namespace conveyor
