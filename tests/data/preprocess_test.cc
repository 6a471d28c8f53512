#include "data/preprocess.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/tokenizers/gpt2_bpe_tokenizer.h"
#include "data/tokenizers/simple_tokenizers.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::TestDataDir;

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

// Expects every one of `parts` in `text`.
void ExpectContains(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_PRED_FORMAT2(::testing::IsSubstring, part, text);
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// Options for a ByteTokenizer run over `text` written to <dir>/in.jsonl,
// output prefix <dir>/out, no progress lines.
PreprocessOptions ByteOptions(const std::string& dir, const std::string& text) {
  PreprocessOptions options;
  options.input = WriteInput(dir, text);
  options.output_prefix = dir + "/out";
  options.log_interval = 0;
  return options;
}

// Runs Preprocess expecting it to fail; returns the message and expects that
// no output file was left behind.
std::string FailureOf(const PreprocessOptions& options) {
  ByteTokenizer tok;
  absl::StatusOr<PreprocessSummary> summary = Preprocess(options, tok);
  EXPECT_FALSE(summary.ok());
  const std::string prefix = options.output_prefix + "_" + options.json_keys[0] + "_document";
  EXPECT_FALSE(Exists(prefix + ".bin")) << prefix;
  EXPECT_FALSE(Exists(prefix + ".idx")) << prefix;
  return summary.ok() ? "" : std::string(summary.status().message());
}

TEST(PreprocessTest, WritesOneDocumentPerLineWithEod) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options;
  options.input = WriteInput(dir,
                             "{\"text\": \"ab\"}\n\n{\"text\": \"\\u00e9x\", \"id\": 3}\n"
                             "{\"text\": \"\"}\n{\"text\": \"z\"}");
  options.output_prefix = dir + "/out";
  options.append_eod = true;
  options.workers = 2;
  options.log_interval = 0;
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
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir,
                                          "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n"
                                          "{\"other\": 1, \"id\": 2}\n{\"text\": \"fine\"}\n");
  ExpectContains(FailureOf(options),
                 {"in.jsonl:2: JSON: unterminated string at byte 23; each line must hold one "
                  "JSON object: fix the line, or pass --skip-bad-lines to drop such lines"});

  options.skip_bad_lines = true;
  const std::string log_path = dir + "/log";
  options.log = std::fopen(log_path.c_str(), "w");
  ByteTokenizer tok;
  auto skipped = Preprocess(options, tok);
  std::fclose(options.log);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->documents, 2);
  EXPECT_EQ(skipped->skipped_lines, 2);
  EXPECT_EQ(skipped->lines, 4);
  // Skipped lines are reported without the fix: the run goes on.
  EXPECT_EQ(testing_util::ReadFileOrDie(log_path),
            "skipping " + options.input +
                ":2: JSON: unterminated string at byte 23\n"
                "skipping " +
                options.input + ":3: no field \"text\" (the line's fields: \"other\", \"id\")\n");
  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(*(*ds)->Get(0), Bytes("ok"));
  EXPECT_EQ(*(*ds)->Get(1), Bytes("fine"));
}

TEST(PreprocessTest, MissingKeyNamesTheLineTheFieldsAndTheFix) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir, "{\"text\": \"a\"}\n\n{\"body\": \"b\"}\n");
  ExpectContains(FailureOf(options),
                 {"in.jsonl:3: no field \"text\" (the line's fields: \"body\"); --json-keys "
                  "names the fields to read (default: text); name the one that holds the text, "
                  "or pass --skip-bad-lines to drop such lines"});
  ExpectContains(FailureOf(ByteOptions(dir, "{}\n")),
                 {"in.jsonl:1: no field \"text\" (the line has no fields); --json-keys"});
  PreprocessOptions wrong_type = ByteOptions(dir, "{\"text\": 7}\n");
  ExpectContains(FailureOf(wrong_type),
                 {"in.jsonl:1: field \"text\" is a number: it must be a string, or a list of "
                  "strings (sentences); fix the line, or pass --skip-bad-lines"});
  PreprocessOptions not_object = ByteOptions(dir, "[\"text\"]\n");
  ExpectContains(FailureOf(not_object),
                 {"in.jsonl:1: the line is a list, not a JSON object; each line must hold one "
                  "JSON object"});
}

TEST(PreprocessTest, InvalidUtf8IsABadLineAsInMegatron) {
  const std::string dir = FreshDir("preprocess");
  // Raw bytes FF FE inside a string (Latin-1 or UTF-16 text, say).
  PreprocessOptions options =
      ByteOptions(dir, "{\"text\": \"fine\"}\n{\"text\":\"bad \xff\xfe utf8\"}\n");
  ExpectContains(FailureOf(options),
                 {"in.jsonl:2: invalid UTF-8 at byte 13 of the line (0xFF)", "UnicodeDecodeError",
                  "; re-encode the input as UTF-8", "or pass --skip-bad-lines to drop such lines"});
  // Well-formed but not UTF-8 as Python decodes it: an encoded surrogate and
  // an overlong '/'.
  ExpectContains(FailureOf(ByteOptions(FreshDir("preprocess"), "{\"text\":\"\xed\xa0\x80\"}\n")),
                 {"in.jsonl:1: invalid UTF-8 at byte 9 of the line (0xED)"});
  ExpectContains(FailureOf(ByteOptions(FreshDir("preprocess"), "{\"text\":\"\xc0\xaf\"}\n")),
                 {"in.jsonl:1: invalid UTF-8 at byte 9 of the line (0xC0)"});

  options.skip_bad_lines = true;
  options.log = std::fopen("/dev/null", "w");
  ByteTokenizer tok;
  auto skipped = Preprocess(options, tok);
  std::fclose(options.log);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->documents, 1);
  EXPECT_EQ(skipped->skipped_lines, 1);
}

TEST(PreprocessTest, ByteOrderMarkIsNamedWithItsFix) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir, "\xEF\xBB\xBF{\"text\": \"a\"}\n");
  ExpectContains(FailureOf(options),
                 {"in.jsonl:1: the line starts with a UTF-8 byte-order mark (bytes EF BB BF)",
                  "; save the file as UTF-8 without the mark (e.g. sed -i "
                  "'s/^\\xEF\\xBB\\xBF//' " +
                      options.input + "), or pass --skip-bad-lines"});
}

TEST(PreprocessTest, DuplicateKeysTakeTheLastValueAsPythonDoes) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir, "{\"text\":\"a\",\"id\":1,\"text\":\"dup\"}\n");
  ByteTokenizer tok;
  auto summary = Preprocess(options, tok);
  ASSERT_TRUE(summary.ok()) << summary.status();
  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_sequences(), 1);
  EXPECT_EQ(*(*ds)->Get(0), Bytes("dup"));
}

TEST(PreprocessTest, ListValuesAreSentencesOneSequenceEach) {
  const std::string dir = FreshDir("preprocess");
  // As Megatron's encode(): sentences of no tokens are dropped, the eod ends
  // the document's last sequence, and a document of no tokens gets no eod.
  PreprocessOptions options = ByteOptions(dir,
                                          "{\"text\": [\"sent one.\", \"\", \"two\"]}\n"
                                          "{\"text\": [\"\", \"\"]}\n"
                                          "{\"text\": []}\n"
                                          "{\"text\": \"whole\"}\n"
                                          "{\"text\": [\"x\"]}\n");
  options.append_eod = true;
  options.workers = 2;
  ByteTokenizer tok;
  auto summary = Preprocess(options, tok);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->documents, 5);
  EXPECT_EQ(summary->tokens, 9 + 4 + 6 + 2);

  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->document_indices(), (std::vector<int64_t>{0, 2, 2, 2, 3, 4}));
  EXPECT_EQ((*ds)->sequence_lengths(), (std::vector<int32_t>{9, 4, 6, 2}));
  std::vector<int64_t> two = Bytes("two"), whole = Bytes("whole"), x = Bytes("x");
  for (auto* v : {&two, &whole, &x}) v->push_back(256);
  EXPECT_EQ(*(*ds)->Get(0), Bytes("sent one."));
  EXPECT_EQ(*(*ds)->Get(1), two);
  EXPECT_EQ(*(*ds)->Get(2), whole);
  EXPECT_EQ(*(*ds)->Get(3), x);
}

TEST(PreprocessTest, ListWithANonStringIsABadLine) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir, "{\"text\": [\"a\"]}\n{\"text\": [\"a\", 2]}\n");
  ExpectContains(FailureOf(options),
                 {"in.jsonl:2: field \"text\" is a list whose element 1 (from 0) is a number: a "
                  "list must hold only strings, the document's sentences; fix the line, or pass "
                  "--skip-bad-lines"});
}

TEST(PreprocessTest, NoDocumentsIsAnErrorThatSaysWhyAndLeavesNoFiles) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions empty = ByteOptions(dir, "");
  EXPECT_EQ(FailureOf(empty), empty.input +
                                  ": no documents to write, so no dataset was written: the file "
                                  "is empty");
  PreprocessOptions blank = ByteOptions(dir, "\n  \n\r\n");
  ExpectContains(FailureOf(blank), {"its 3 lines are all blank"});

  PreprocessOptions all_bad = ByteOptions(dir, "{\"body\": \"a\"}\nnot json\n");
  all_bad.skip_bad_lines = true;
  all_bad.log = std::fopen("/dev/null", "w");
  ExpectContains(FailureOf(all_bad),
                 {"in.jsonl: no documents to write, so no dataset was written: every line was "
                  "bad (2 skipped, each reported above); fix the lines, or check that "
                  "--json-keys (text) names fields they have"});
  std::fclose(all_bad.log);
}

// Documents whose texts are all empty used to make a dataset of no tokens,
// which the trainer then refused.
TEST(PreprocessTest, EveryTextEmptyIsAnErrorNamingTheFileAndTheKey) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir, "{\"text\": \"\"}\n{\"text\": [\"\", \"\"]}\n");
  options.append_eod = true;
  EXPECT_EQ(FailureOf(options),
            options.input +
                ": field \"text\" is empty (no tokens) in every document (2 in all), so no "
                "dataset was written: the trainer refuses an empty dataset; check that "
                "--json-keys names the field that holds the text");
  // One key with text does not save another that has none.
  options = ByteOptions(dir, "{\"text\": \"a\", \"title\": \"\"}\n");
  options.json_keys = {"text", "title"};
  ExpectContains(FailureOf(options),
                 {"field \"title\" is empty (no tokens) in every document (1 in all)"});
  EXPECT_FALSE(Exists(dir + "/out_title_document.bin"));
  EXPECT_FALSE(Exists(dir + "/out_title_document.idx"));
}

// A tokenizer whose vocabulary matches nothing: every text tokenizes to no ids.
class EmptyVocabularyTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view) const override {
    return std::vector<int32_t>();
  }
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t>) const override { return ""; }
  int64_t vocab_size() const override { return 1; }
  int32_t eod() const override { return 0; }
};

// Text that makes no tokens blames the tokenizer, not --json-keys (which named the
// field that holds the text).
TEST(PreprocessTest, TextThatMakesNoTokensBlamesTheTokenizer) {
  const std::string dir = FreshDir("preprocess");
  const PreprocessOptions options = ByteOptions(dir, "{\"text\": \"hello\"}\n{\"text\": \"you\"}\n");
  EmptyVocabularyTokenizer tok;
  absl::StatusOr<PreprocessSummary> summary = Preprocess(options, tok);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().message(),
            options.input +
                ": field \"text\" holds 8 bytes of text in 2 documents, but the tokenizer made no "
                "token of any of it: its vocabulary (1 ids) is empty or matches none of the text; "
                "check the tokenizer files (--vocab-file and --merge-file, --tokenizer-model) and "
                "--tokenizer-type");
  EXPECT_FALSE(Exists(dir + "/out_text_document.bin"));
}

TEST(PreprocessTest, AFailedRunRemovesWhatItWrote) {
  const std::string dir = FreshDir("preprocess");
  // Two keys, and the bad line comes after a batch's worth of good ones
  // were written to both datasets.
  std::string input;
  for (int i = 0; i < 9000; ++i) input += "{\"text\": \"a\", \"title\": \"b\"}\n";
  input += "{\"text\": \"a\"}\n";
  PreprocessOptions options = ByteOptions(dir, input);
  options.json_keys = {"text", "title"};
  ExpectContains(FailureOf(options), {"in.jsonl:9001: no field \"title\""});
  EXPECT_FALSE(Exists(dir + "/out_title_document.bin"));
  EXPECT_FALSE(Exists(dir + "/out_title_document.idx"));
}

TEST(PreprocessTest, DirectoryInputAndRepeatedKeysAreRefused) {
  const std::string dir = FreshDir("preprocess");
  PreprocessOptions options = ByteOptions(dir, "{\"text\": \"a\"}\n");
  options.input = dir;
  EXPECT_EQ(FailureOf(options),
            "--input " + dir +
                " is a directory, not a file: name one JSON-lines file in it (run preprocess "
                "once per file, or concatenate the files first)");
  PreprocessOptions twice = ByteOptions(dir, "{\"text\": \"a\"}\n");
  twice.json_keys = {"text", "text"};
  EXPECT_EQ(FailureOf(twice),
            "--json-keys names \"text\" twice; each key makes one dataset: name it once");
}

TEST(PreprocessTest, LogIntervalCountsDocuments) {
  const std::string dir = FreshDir("preprocess");
  std::string input;
  for (int i = 0; i < 5; ++i) input += "{\"text\": \"ab\"}\n";
  PreprocessOptions options = ByteOptions(dir, input);
  options.log_interval = 2;
  const std::string log_path = dir + "/log";
  options.log = std::fopen(log_path.c_str(), "w");
  ByteTokenizer tok;
  auto summary = Preprocess(options, tok);
  std::fclose(options.log);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const std::string log = testing_util::ReadFileOrDie(log_path);
  ExpectContains(log, {"processed 2 documents (", "processed 4 documents ("});
  EXPECT_EQ(log.find("processed 5"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
}

TEST(PreprocessTest, Gpt2TokensForSeveralKeysAndWorkers) {
  const std::string shared = TestDataDir() + "/gpt2";
  auto tok = Gpt2BpeTokenizer::Load(shared + "/vocab.json", shared + "/merges.txt");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string dir = FreshDir("preprocess");
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
  options.log_interval = 0;
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

// Runs the preprocess binary with `args` (shell words); returns its exit
// status and puts its stdout and stderr in `log`.
int RunPreprocess(const std::string& dir, const std::string& args, std::string* log) {
  const std::string binary = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                             std::getenv("TEST_WORKSPACE") + "/data/preprocess";
  const std::string cmd = binary + " " + args + " > " + dir + "/log 2>&1";
  const int status = std::system(cmd.c_str());
  *log = testing_util::ReadFileOrDie(dir + "/log");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PreprocessBinaryTest, RunsEndToEnd) {
  const std::string dir = FreshDir("preprocess");
  const std::string input = WriteInput(dir, "{\"text\": \"1 2 3\"}\n{\"text\": \"7\"}\n");
  std::string log;
  ASSERT_EQ(RunPreprocess(dir,
                          "--input " + input + " --output-prefix " + dir +
                              "/out --tokenizer-type NullTokenizer --vocab-size 100"
                              " --json-keys text --append-eod --workers 2",
                          &log),
            0)
      << log;
  ExpectContains(log, {"done: 2 documents, 6 tokens (uint16), 0 bad lines skipped"});
  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(*(*ds)->Get(0), (std::vector<int64_t>{1, 2, 3, 100}));
  EXPECT_EQ(*(*ds)->Get(1), (std::vector<int64_t>{7, 100}));

  EXPECT_EQ(RunPreprocess(dir,
                          "--input " + dir + "/missing.jsonl --output-prefix " + dir +
                              "/x --tokenizer-type ByteTokenizer",
                          &log),
            2);  // input to change, as every refusal of input (base/exit_code.h)
  ExpectContains(log, {"cannot read --input " + dir + "/missing.jsonl: No such file"});
}

TEST(PreprocessBinaryTest, TakesArgparseFlagEqualsValue) {
  const std::string dir = FreshDir("preprocess");
  const std::string input = WriteInput(dir, "{\"body\": \"ab\"}\n");
  std::string log;
  ASSERT_EQ(RunPreprocess(dir,
                          "--input=" + input + " --output-prefix=" + dir +
                              "/out --tokenizer-type=ByteTokenizer --json-keys=body",
                          &log),
            0)
      << log;
  ExpectContains(log, {"wrote " + dir + "/out_body_document.bin/.idx"});
}

TEST(PreprocessBinaryTest, WritingNothingFailsAndLeavesNoFiles) {
  const std::string dir = FreshDir("preprocess");
  const std::string bytes = " --output-prefix " + dir + "/out --tokenizer-type ByteTokenizer";
  std::string log;
  // Input to change: exit 2, as every refusal of input (base/exit_code.h).
  EXPECT_EQ(RunPreprocess(dir, "--input " + dir + bytes, &log), 2);
  ExpectContains(log, {"preprocess: --input " + dir + " is a directory, not a file"});

  const std::string empty = WriteInput(dir, "");
  EXPECT_EQ(RunPreprocess(dir, "--input " + empty + bytes, &log), 2);
  ExpectContains(log, {"preprocess: " + empty +
                       ": no documents to write, so no dataset was written: the file is empty"});
  EXPECT_FALSE(Exists(dir + "/out_text_document.bin"));
  EXPECT_FALSE(Exists(dir + "/out_text_document.idx"));

  const std::string empty_texts = WriteInput(dir, "{\"text\": \"\"}\n");
  EXPECT_EQ(RunPreprocess(dir, "--input " + empty_texts + bytes + " --append-eod", &log), 2);
  ExpectContains(log, {"preprocess: " + empty_texts +
                       ": field \"text\" is empty (no tokens) in every document (1 in all)"});
  EXPECT_FALSE(Exists(dir + "/out_text_document.bin"));
  EXPECT_FALSE(Exists(dir + "/out_text_document.idx"));
}

TEST(PreprocessBinaryTest, FlagErrorsSayWhyAndWhatInstead) {
  const std::string dir = FreshDir("preprocess");
  const std::string input = WriteInput(dir, "{\"text\": \"a\"}\n");
  const std::string base =
      "--input " + input + " --output-prefix " + dir + "/out --tokenizer-type ByteTokenizer ";
  struct Case {
    std::string flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--split-sentences",
       "preprocess: Megatron's --split-sentences has no counterpart here: it splits documents "
       "into sentences with NLTK"},
      {"--keep-newlines",
       "Megatron's --keep-newlines has no counterpart here: it only changes "
       "how --split-sentences splits"},
      {"--lang english", "Megatron's --lang has no counterpart here"},
      {"--partitions 4",
       "documents keep the input order, Megatron's --partitions 1 output. Drop "
       "the flag and set --workers"},
      {"--keep-sequential-samples", "here documents always keep it. Drop the flag"},
      {"--tokenizer-model m.model",
       "--tokenizer-model is for the tokenizers read from a model file (HuggingFaceTokenizer, "
       "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, TikTokenizer), not "
       "ByteTokenizer; drop --tokenizer-model"},
      {"--dataset-impl mmap",
       "the mmap .bin/.idx format, the only one Megatron writes today, is "
       "the only one here. Drop the flag"},
      {"--vocab v.json",
       "unknown flag --vocab: did you mean --vocab-file or --vocab-extra-ids or --vocab-size?"},
      {"--log-interval 0",
       "--log-interval needs a positive integer (documents between progress "
       "lines, as Megatron's), got '0'"},
      {"--vocab-size 100",
       "--vocab-size is for NullTokenizer only: ByteTokenizer's vocabulary is "
       "fixed (256 bytes and eod); drop --vocab-size"},
      {"--merge-file m.txt",
       "--merge-file is for GPT2BPETokenizer only: ByteTokenizer reads no "
       "files; drop --merge-file"},
      {"--append-eod=maybe", "--append-eod expects true, false, 1 or 0, got 'maybe'"},
  };
  for (const Case& c : cases) {
    std::string log;
    EXPECT_EQ(RunPreprocess(dir, base + c.flags, &log), 2) << c.flags;
    // The problem and a pointer to --help, not the whole help after it (which pushed
    // the problem off the screen).
    ExpectContains(log, {c.message, "preprocess: run with --help to list every flag"});
    EXPECT_EQ(log.find("usage: preprocess"), std::string::npos) << c.flags;
    EXPECT_FALSE(Exists(dir + "/out_text_document.bin")) << c.flags;
  }
}

// --help lists the flags of PreprocessOptions (proto/tools.proto) with their help.
TEST(PreprocessBinaryTest, HelpComesFromTheProto) {
  const std::string dir = FreshDir("preprocess");
  std::string log;
  EXPECT_EQ(RunPreprocess(dir, "--help", &log), 0) << log;
  ExpectContains(log, {"usage: preprocess",
                       "--tokenizer-type {\"\"|GPT2BPETokenizer|NullTokenizer|ByteTokenizer|"
                       "HuggingFaceTokenizer|SentencePieceTokenizer|GPTSentencePieceTokenizer|"
                       "Llama2Tokenizer|TikTokenizer}  "
                       "(default: \"\")",
                       "--log-interval INT  (default: 1000)", "--json-keys STRING ...",
                       "--append-eod [=true|false]"});
}

// As in Megatron's tools/preprocess_data.py, a tokenizer must be named; GPT-2's files
// name GPT2BPETokenizer, as they do for the trainer.
TEST(PreprocessBinaryTest, TokenizerTypeIsRequiredUnlessGpt2FilesNameIt) {
  const std::string dir = FreshDir("preprocess");
  const std::string input = WriteInput(dir, "{\"text\": \"Hello world\"}\n");
  std::string log;
  EXPECT_EQ(RunPreprocess(dir, "--input " + input + " --output-prefix " + dir + "/out", &log), 2);
  ExpectContains(log, {"preprocess: --tokenizer-type is required (GPT2BPETokenizer is taken "
                       "when --vocab-file or --merge-file is given)"});
  EXPECT_FALSE(Exists(dir + "/out_text_document.bin"));
  const std::string gpt2 = TestDataDir() + "/gpt2";
  ASSERT_EQ(RunPreprocess(dir,
                          "--input " + input + " --output-prefix " + dir + "/out --vocab-file " +
                              gpt2 + "/vocab.json --merge-file " + gpt2 + "/merges.txt",
                          &log),
            0)
      << log;
  // GPT-2's ids of "Hello world" (tiktoken's gpt2 encoding: [15496, 995]), in uint16.
  std::ifstream bin(dir + "/out_text_document.bin", std::ios::binary);
  std::vector<uint16_t> ids(2);
  bin.read(reinterpret_cast<char*>(ids.data()), 4);
  EXPECT_EQ(ids, (std::vector<uint16_t>{15496, 995}));
}

TEST(PreprocessBinaryTest, VocabSizeIsRefusedWithGpt2) {
  const std::string dir = FreshDir("preprocess");
  const std::string shared = TestDataDir() + "/gpt2";
  const std::string input = WriteInput(dir, "{\"text\": \"a\"}\n");
  std::string log;
  EXPECT_EQ(RunPreprocess(dir,
                          "--input " + input + " --output-prefix " + dir +
                              "/out --tokenizer-type GPT2BPETokenizer --vocab-file " + shared +
                              "/vocab.json --merge-file " + shared + "/merges.txt --vocab-size 100",
                          &log),
            2);
  ExpectContains(log, {"preprocess: --vocab-size is for NullTokenizer only: GPT2BPETokenizer's "
                       "vocabulary is the one in --vocab-file; drop --vocab-size"});
}

}  // namespace
}  // namespace conveyor
