#include "data/preprocess.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/gpt2_bpe_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data/simple_tokenizers.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace conveyor {
namespace {

using ::conveyor::testing::SharedDataDir;
using ::conveyor::testing::TempDir;

std::string WriteInput(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/in.jsonl";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

std::vector<int64_t> Bytes(const std::string& s) {
  return std::vector<int64_t>(reinterpret_cast<const unsigned char*>(s.data()),
                              reinterpret_cast<const unsigned char*>(s.data()) + s.size());
}

TEST(PreprocessTest, WritesOneDocumentPerLineWithEod) {
  const std::string dir = TempDir();
  PreprocessOptions options;
  options.input = WriteInput(dir,
                             "{\"text\": \"ab\"}\n\n{\"text\": \"\\u00e9x\", \"id\": 3}\n"
                             "{\"text\": \"\"}\n{\"text\": \"z\"}");
  options.output_prefix = dir + "/out";
  options.append_eod = true;
  options.workers = 2;
  options.log_interval_s = 0;
  ByteTokenizer tok;
  auto summary = Preprocess(options, tok);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->documents, 4);
  EXPECT_EQ(summary->dtype, TokenDType::kUint16);

  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  // The empty document has no sequences but still counts as a document.
  EXPECT_EQ((*ds)->num_documents(), 4);
  EXPECT_EQ((*ds)->num_sequences(), 3);
  EXPECT_EQ((*ds)->document_indices(), (std::vector<int64_t>{0, 1, 2, 2, 3}));
  std::vector<int64_t> a = Bytes("ab"), b = Bytes("\xC3\xA9x"), c = Bytes("z");
  for (auto* v : {&a, &b, &c}) v->push_back(256);
  EXPECT_EQ(*(*ds)->Get(0), a);
  EXPECT_EQ(*(*ds)->Get(1), b);
  EXPECT_EQ(*(*ds)->Get(2), c);
}

TEST(PreprocessTest, MalformedLinesAreFatalOrSkippedWithLineNumbers) {
  const std::string dir = TempDir();
  PreprocessOptions options;
  options.input = WriteInput(dir,
                             "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n"
                             "{\"other\": 1}\n{\"text\": \"fine\"}\n");
  options.output_prefix = dir + "/out";
  options.log_interval_s = 0;
  ByteTokenizer tok;
  auto fatal = Preprocess(options, tok);
  ASSERT_FALSE(fatal.ok());
  EXPECT_NE(std::string(fatal.status().message()).find("in.jsonl:2:"), std::string::npos)
      << fatal.status();

  options.skip_bad_lines = true;
  options.log = std::fopen("/dev/null", "w");
  auto skipped = Preprocess(options, tok);
  std::fclose(options.log);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->documents, 2);
  EXPECT_EQ(skipped->skipped_lines, 2);
}

TEST(PreprocessTest, Gpt2TokensForSeveralKeysAndWorkers) {
  const std::string shared = SharedDataDir() + "/gpt2";
  auto tok = Gpt2BpeTokenizer::Load(shared + "/vocab.json", shared + "/merges.txt");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string dir = TempDir();
  std::string input;
  for (int i = 0; i < 100; ++i) {
    input += "{\"text\": \"Hello world\", \"title\": \"Doc " + std::to_string(i) + "\"}\n";
  }
  PreprocessOptions options;
  options.input = WriteInput(dir, input);
  options.output_prefix = dir + "/out";
  options.json_keys = {"text", "title"};
  options.append_eod = true;
  options.workers = 3;
  options.log_interval_s = 0;
  auto summary = Preprocess(options, **tok);
  ASSERT_TRUE(summary.ok()) << summary.status();
  auto text = IndexedDataset::Open(dir + "/out_text_document");
  auto title = IndexedDataset::Open(dir + "/out_title_document");
  ASSERT_TRUE(text.ok() && title.ok());
  EXPECT_EQ((*text)->num_documents(), 100);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(*(*text)->Get(i), (std::vector<int64_t>{15496, 995, 50256}));
    auto expected = (*tok)->Tokenize("Doc " + std::to_string(i));
    std::vector<int64_t> want(expected->begin(), expected->end());
    want.push_back(50256);
    EXPECT_EQ(*(*title)->Get(i), want);
  }
}

TEST(PreprocessBinaryTest, RunsEndToEnd) {
  const std::string binary = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                             std::getenv("TEST_WORKSPACE") + "/data/preprocess";
  const std::string dir = TempDir();
  const std::string input = WriteInput(dir, "{\"text\": \"1 2 3\"}\n{\"text\": \"7\"}\n");
  const std::string cmd = binary + " --input " + input + " --output-prefix " + dir +
                          "/out --tokenizer-type NullTokenizer --vocab-size 100" +
                          " --json-keys text --append-eod --workers 2 > " + dir + "/log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::ReadFileOrDie(dir + "/log");
  const std::string log = testing::ReadFileOrDie(dir + "/log");
  EXPECT_NE(log.find("done: 2 documents, 6 tokens"), std::string::npos) << log;
  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(*(*ds)->Get(0), (std::vector<int64_t>{1, 2, 3, 100}));
  EXPECT_EQ(*(*ds)->Get(1), (std::vector<int64_t>{7, 100}));

  const std::string bad = binary + " --input " + dir + "/missing.jsonl --output-prefix " + dir +
                          "/x --tokenizer-type ByteTokenizer > " + dir + "/log2 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_NE(testing::ReadFileOrDie(dir + "/log2").find("missing.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
