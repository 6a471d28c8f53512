// The file-based tokenizers through the tools: preprocess (the binary, with
// --workers and --append-eod) writes exactly the reference ids of each
// document, decoding them gives the reference text back, and training takes
// the vocabulary size and eod from the tokenizer.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/tokenizers/tokenizer_factory.h"
#include "data/training_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/data/tokenizer_fixtures.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadFixtureJson;
using ::conveyor::testing_util::TokenizerFixture;
using ::testing::HasSubstr;

struct PipelineCase {
  std::string name;
  TokenizerSpec spec;
  std::string expected;  // fixture path of the reference ids
};

std::vector<PipelineCase> Cases() {
  std::vector<PipelineCase> cases;
  for (const char* folder : {"hf_llama3", "hf_llama2_spm_bpe", "hf_gpt2"}) {
    TokenizerSpec spec;
    spec.type = "HuggingFaceTokenizer";
    spec.tokenizer_model = TokenizerFixture(folder);
    cases.push_back({folder, spec, std::string(folder) + "/expected.json"});
  }
  TokenizerSpec spm;
  spm.type = "GPTSentencePieceTokenizer";
  spm.tokenizer_model = TokenizerFixture("spm_mistral_v1/tokenizer.model");
  cases.push_back({"spm_mistral_v1", spm, "spm_mistral_v1/expected.json"});
  const nlohmann::json v2 = ReadFixtureJson(TokenizerFixture("tiktoken/expected_v2.json"));
  TokenizerSpec tiktoken;
  tiktoken.type = "TikTokenizer";
  tiktoken.tokenizer_model = TokenizerFixture("tiktoken/ranks.json");
  tiktoken.tiktoken_pattern = "v2";
  tiktoken.tiktoken_num_special_tokens = v2.at("num_special_tokens").get<int>();
  tiktoken.vocab_size = v2.at("vocab_size").get<int64_t>();
  cases.push_back({"tiktoken_v2", tiktoken, "tiktoken/expected_v2.json"});
  return cases;
}

std::string Flags(const TokenizerSpec& spec) {
  std::string flags =
      "--tokenizer-type " + spec.type + " --tokenizer-model " + spec.tokenizer_model;
  if (spec.type == "TikTokenizer") {
    flags += " --tiktoken-pattern " + spec.tiktoken_pattern + " --tiktoken-num-special-tokens " +
             std::to_string(spec.tiktoken_num_special_tokens) + " --vocab-size " +
             std::to_string(spec.vocab_size);
  }
  return flags;
}

// Runs data/`tool` with `args`; its exit status, and its output in `log`.
int RunTool(const std::string& tool, const std::string& dir, const std::string& args,
            std::string* log) {
  const std::string binary = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                             std::getenv("TEST_WORKSPACE") + "/data/" + tool;
  const int status = std::system((binary + " " + args + " > " + dir + "/log 2>&1").c_str());
  std::ifstream in(dir + "/log");
  log->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// inspect_data's escaping of a sample's text.
std::string Escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(char(c));
    }
  }
  return out;
}

class PipelineTest : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineTest, PreprocessWritesTheReferenceIdsAndTheyDecodeBack) {
  const PipelineCase& c = GetParam();
  const nlohmann::json expected = ReadFixtureJson(TokenizerFixture(c.expected));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = BuildTokenizer(c.spec);
  ASSERT_TRUE(tok.ok()) << tok.status();

  // The corpus as JSON lines (empty texts make no document).
  const std::string dir = FreshDir("pipeline_" + c.name);
  std::vector<const nlohmann::json*> documents;
  {
    std::ofstream out(dir + "/corpus.jsonl");
    for (const nlohmann::json& d : expected.at("cases")) {
      if (d.at("text").get<std::string>().empty()) continue;
      out << nlohmann::json{{"text", d.at("text")}}.dump() << "\n";
      documents.push_back(&d);
    }
  }
  std::string log;
  ASSERT_EQ(RunTool("preprocess", dir,
                    "--input " + dir + "/corpus.jsonl --output-prefix " + dir +
                        "/out --workers 2 --append-eod " + Flags(c.spec),
                    &log),
            0)
      << log;
  auto ds = IndexedDataset::Open(dir + "/out_text_document");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->num_documents(), int64_t(documents.size()));
  for (size_t i = 0; i < documents.size(); ++i) {
    std::vector<int32_t> ids;
    ASSERT_TRUE((*ds)->AppendTokens(int64_t(i), 0, -1, &ids).ok());
    std::vector<int32_t> want = documents[i]->at("ids").get<std::vector<int32_t>>();
    want.push_back((*tok)->eod());
    EXPECT_EQ(ids, want) << "document " << i << ": " << documents[i]->at("text");
    ids.pop_back();
    absl::StatusOr<std::string> text = (*tok)->Detokenize(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, documents[i]->at("decoded").get<std::string>());
  }

  // inspect_data --decode: one sample holding every token (seq-length + 1 of
  // them) shows each document's reference text, escaped as inspect_data does.
  ASSERT_EQ(RunTool("inspect_data", dir,
                    "--data-path " + dir + "/out_text_document --split 1,0,0 --num-samples 1 " +
                        "--seq-length " + std::to_string((*ds)->num_tokens() - 1) +
                        " --decode --data-cache-path " + dir + "/cache " + Flags(c.spec),
                    &log),
            0)
      << log;
  for (const nlohmann::json* d : documents) {
    EXPECT_THAT(log, HasSubstr(Escaped(d->at("decoded").get<std::string>())));
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, PipelineTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<PipelineCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(TrainingVocabularyTest, ComesFromTheTokenizerFile) {
  Config config;
  config.mutable_data()->set_tokenizer_type("HuggingFaceTokenizer");
  config.mutable_data()->set_tokenizer_model(TokenizerFixture("hf_llama3"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = ResolveVocabulary(&config);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const nlohmann::json expected = ReadFixtureJson(TokenizerFixture("hf_llama3/expected.json"));
  EXPECT_EQ(config.model().vocab_size(), expected.at("vocab_size").get<int>());
  EXPECT_EQ((*tok)->eod(), expected.at("eod").get<int>());
}

TEST(TrainingVocabularyTest, TikTokenizerUsesVocabSizeAsMegatronDoes) {
  Config config;
  config.mutable_data()->set_tokenizer_type("TikTokenizer");
  config.mutable_data()->set_tokenizer_model(TokenizerFixture("tiktoken/ranks.json"));
  config.mutable_data()->set_tiktoken_pattern("v1");
  config.mutable_data()->set_tiktoken_num_special_tokens(3);
  config.mutable_model()->set_vocab_size(1150);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = ResolveVocabulary(&config);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(config.model().vocab_size(), 1150);
  EXPECT_EQ((*tok)->eod(), 2);  // </s>
}

TEST(TrainingVocabularyTest, VocabularyLargerThanVocabSizeIsRefused) {
  Config config;
  config.mutable_data()->set_tokenizer_type("HuggingFaceTokenizer");
  config.mutable_data()->set_tokenizer_model(TokenizerFixture("hf_gpt2"));
  config.mutable_model()->set_vocab_size(1000);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = ResolveVocabulary(&config);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("more than --vocab-size 1000"));
}

TEST(TrainingVocabularyTest, MissingFlagsAreNamed) {
  TokenizerSpec spec;
  spec.type = "HuggingFaceTokenizer";
  EXPECT_THAT(BuildTokenizer(spec).status().message(), HasSubstr("--tokenizer-model is missing"));
  spec.type = "TikTokenizer";
  spec.tokenizer_model = TokenizerFixture("tiktoken/ranks.json");
  EXPECT_THAT(BuildTokenizer(spec).status().message(), HasSubstr("--tiktoken-pattern is missing"));
  spec.type = "Llama2Tokenizer";
  spec.vocab_extra_ids = 2;
  EXPECT_THAT(BuildTokenizer(spec).status().message(),
              HasSubstr("--vocab-extra-ids is for --tokenizer-type SentencePieceTokenizer only"));
}

}  // namespace
}  // namespace conveyor
