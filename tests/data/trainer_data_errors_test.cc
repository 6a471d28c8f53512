// The trainer binary on real .bin/.idx data: token ids the model has no row
// for stop the run (non-zero exit) with the file, the id and the fix, whether
// they show in the first sample or only at a later step; a .bin/.idx path and
// an empty dataset say what is wrong; data inside the vocabulary trains, with
// the same loss under every tensor-parallel layout.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/indexed_dataset_builder.h"
#include "data/training_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadFileOrDie;
using ::conveyor::testing_util::TestDataDir;
using ::testing::HasSubstr;
using ::testing::Not;

struct RunResult {
  int exit_code;
  std::string out, err;
};

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/", path);
}

// gpt-tiny on 16-token sequences, 6 steps of 8 samples, no validation.
RunResult Train(const std::string& args) {
  const std::string dir = FreshDir("data_errors");
  const std::string command = absl::StrCat(
      Runfile("trainer/trainer"), " --config ", Runfile("configs/gpt-tiny.textproto"),
      " --mock-data=false --seq-length 16 --split 1,0,0 --train-iters 6 --lr-warmup-iters 1"
      " --log-interval 1 --seed 1234 ",
      args, " >", dir, "/out 2>", dir, "/err");
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFileOrDie(dir + "/out"),
          ReadFileOrDie(dir + "/err")};
}

double FinalLoss(const RunResult& r) {
  const std::string key = "final lm loss ";
  const size_t at = r.out.rfind(key);
  double loss = NAN;
  if (at == std::string::npos ||
      !absl::SimpleAtod(r.out.substr(at + key.size(), r.out.find('\n', at) - at - key.size()),
                        &loss)) {
    ADD_FAILURE() << "no final loss in: " << r.out << r.err;
  }
  return loss;
}

std::string Fixture() { return TestDataDir() + "/megatron-fixtures/tiny_uint16"; }

TEST(TrainerDataErrorsTest, IdsOverTheVocabularyStopTheRunNamingFileIdAndFix) {
  RunResult r = Train("--data-path " + Fixture() + " --vocab-size 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr("lm loss")));  // not one step trained
  EXPECT_THAT(r.err, HasSubstr("--data-path " + Fixture() + ": "));
  EXPECT_THAT(r.err, HasSubstr("holds token id "));
  EXPECT_THAT(r.err, HasSubstr("vocabulary of 64 ids"));
  EXPECT_THAT(r.err, HasSubstr("--vocab-size must exceed every token id: the data holds id "
                               "49966; pass --vocab-size 49967"));

  // Under TP=2 too (it used to train, with another loss than TP=1).
  r = Train("--data-path " + Fixture() +
            " --vocab-size 64 --nproc-per-node 2 --tensor-model-parallel-size 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, Not(HasSubstr("lm loss")));
  EXPECT_THAT(r.err, HasSubstr("pass --vocab-size 49967"));

  r = Train("--data-path " + Fixture() + " --tokenizer-type NullTokenizer --vocab-size 1000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(Fixture()));
  EXPECT_THAT(r.err, HasSubstr("vocabulary of 1001 ids"));
  EXPECT_THAT(r.err, HasSubstr("pass --vocab-size 49966"));

  r = Train("--data-path " + Fixture() + " --tokenizer-type ByteTokenizer");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(Fixture()));
  EXPECT_THAT(r.err, HasSubstr("ByteTokenizer (257 ids)"));
  EXPECT_THAT(r.err, HasSubstr("pass the --tokenizer-type"));
}

TEST(TrainerDataErrorsTest, InRangeDataTrainsWithOneLossForEveryLayout) {
  // Both pad the vocabulary to a multiple of 128 (--make-vocab-size-divisible-by
  // times TP), 50048: padded rows take part in the softmax, as in Megatron.
  RunResult one = Train("--data-path " + Fixture() + " --vocab-size 49967");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = Train("--data-path " + Fixture() +
                        " --vocab-size 49967 --nproc-per-node 2 --tensor-model-parallel-size 2"
                        " --make-vocab-size-divisible-by 64");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NEAR(FinalLoss(one), FinalLoss(two), 1e-3);
  // The tokenizer the fixture was drawn for.
  RunResult gpt2 = Train(absl::StrCat(
      "--data-path ", Fixture(), " --tokenizer-type GPT2BPETokenizer --vocab-file ",
      TestDataDir(), "/gpt2/vocab.json --merge-file ", TestDataDir(), "/gpt2/merges.txt"));
  ASSERT_EQ(gpt2.exit_code, 0) << gpt2.err;
  EXPECT_TRUE(std::isfinite(FinalLoss(gpt2)));
}

// A bad id that the first samples do not hold still stops the run, at the step
// whose micro-batch would have carried it and before that step trains.
TEST(TrainerDataErrorsTest, AnIdFirstReadAtALaterStepStopsTheRunThere) {
  // 40 documents of 3..22 ids below 100. A probe copy marks each document's
  // first token (1000 + d) to learn the first sample that reads it; the
  // same lengths give the same samples, so the document read last is planted.
  std::vector<std::vector<int64_t>> docs;
  for (int d = 0; d < 40; ++d) {
    std::vector<int64_t> doc(3 + (d * 7) % 20);
    for (size_t k = 0; k < doc.size(); ++k) doc[k] = (d * 31 + int64_t(k) * 17) % 100;
    docs.push_back(doc);
  }
  auto write = [](const std::string& prefix, const std::vector<std::vector<int64_t>>& ds) {
    auto b = IndexedDatasetBuilder::Create(prefix + ".bin", TokenDType::kUint16);
    ASSERT_TRUE(b.ok());
    for (const auto& d : ds) ASSERT_TRUE((*b)->AddDocument(d, {int32_t(d.size())}).ok());
    ASSERT_TRUE((*b)->Finalize(prefix + ".idx").ok());
  };
  std::vector<std::vector<int64_t>> probe_docs = docs;
  for (int d = 0; d < 40; ++d) probe_docs[d][0] = 1000 + d;
  const std::string probe = FreshDir("data_errors") + "/probe";
  write(probe, probe_docs);
  Config c;
  c.mutable_model()->set_seq_length(16);
  c.mutable_model()->set_vocab_size(2000);
  c.mutable_training()->set_seed(1234);
  c.mutable_data()->add_data_path(probe);
  c.mutable_data()->set_split("1,0,0");
  auto data = BuildTrainingData(c, 6 * 8, 0, 0);
  ASSERT_TRUE(data.ok()) << data.status();
  std::map<int, int64_t> first_sample;
  for (int64_t i = 0; i < 6 * 8; ++i) {
    auto s = data->train->Sample(i);
    ASSERT_TRUE(s.ok());
    for (int32_t t : *s) {
      if (t >= 1000) first_sample.emplace(t - 1000, i);
    }
  }
  int planted = -1;
  for (const auto& [doc, sample] : first_sample) {
    if (planted < 0 || sample > first_sample[planted]) planted = doc;
  }
  ASSERT_GE(planted, 0);
  const int64_t step = first_sample[planted] / 8 + 1;  // global batch 8
  ASSERT_GE(step, 3) << "the planted id should first be read a few steps in";

  docs[planted][0] = 100;
  const std::string prefix = FreshDir("data_errors") + "/late_bad";
  write(prefix, docs);
  RunResult r = Train("--data-path " + prefix + " --vocab-size 100");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("--data-path ", prefix, ": sequence ", planted,
                                            " (token 0) holds token id 100")));
  EXPECT_THAT(r.err, HasSubstr("pass --vocab-size 101"));
  for (int64_t i = 1; i < step; ++i) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat(" iteration %8d/", i))) << r.err;
  }
  EXPECT_THAT(r.out, Not(HasSubstr(absl::StrFormat(" iteration %8d/", step))));
  EXPECT_THAT(r.out, Not(HasSubstr("final lm loss")));
}

TEST(TrainerDataErrorsTest, BinOrIdxPathAndEmptyDatasetSayWhatIsWrong) {
  for (const char* suffix : {".bin", ".idx"}) {
    RunResult r = Train(absl::StrCat("--data-path ", Fixture(), suffix, " --vocab-size 50257"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_THAT(r.err, HasSubstr("--data-path takes a dataset's prefix, without .bin or .idx"));
    EXPECT_THAT(r.err, HasSubstr("pass --data-path " + Fixture()));
  }
  const std::string empty = FreshDir("data_errors") + "/empty";
  auto b = IndexedDatasetBuilder::Create(empty + ".bin", TokenDType::kUint16);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Finalize(empty + ".idx").ok());
  RunResult r = Train("--data-path " + empty + " --vocab-size 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--data-path " + empty + ": the dataset is empty (" + empty +
                               ".idx lists 0 documents, 0 sequences, 0 tokens)"));
  EXPECT_THAT(r.err, Not(HasSubstr("larger share")));
}

// An absurd run length used to end in an uncaught std::bad_alloc (an
// abort); a prefix with a space was split in two; a directory said "No such device".
TEST(TrainerDataErrorsTest, AbsurdSizesSpacesAndDirectoriesSayWhatIsWrong) {
  // 2e9 steps of 4096 samples: petabytes of sample indices.
  RunResult huge = Train("--data-path " + Fixture() +
                         " --vocab-size 49967 --train-iters 2000000000 --num-micro-batches 1024");
  EXPECT_EQ(huge.exit_code, 1) << huge.err;
  EXPECT_THAT(huge.err, HasSubstr(" GiB of host memory, but this process may use "));
  EXPECT_THAT(huge.err, HasSubstr("--train-iters * --global-batch-size"));

  const std::string dir = FreshDir("data_errors") + "/my data";
  std::filesystem::create_directories(dir);
  for (const char* ext : {".bin", ".idx"}) {
    std::filesystem::copy_file(Fixture() + ext, dir + "/tiny_uint16" + ext);
  }
  RunResult spaced =
      Train("--data-path 0.3 '" + dir + "/tiny_uint16' 0.7 " + Fixture() + " --vocab-size 49967");
  ASSERT_EQ(spaced.exit_code, 0) << spaced.err;
  EXPECT_TRUE(std::isfinite(FinalLoss(spaced)));

  RunResult folder = Train("--data-path '" + dir + "' --vocab-size 49967");
  EXPECT_EQ(folder.exit_code, 2);  // input to change (base/exit_code.h)
  EXPECT_THAT(folder.err, HasSubstr("--data-path " + dir +
                                    " is a directory: --data-path takes a dataset's prefix, the "
                                    "path of its .bin/.idx pair without the extension, e.g. "
                                    "--data-path " +
                                    dir + "/tiny_uint16"));
}

}  // namespace
}  // namespace conveyor
