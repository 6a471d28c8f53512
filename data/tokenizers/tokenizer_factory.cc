#include "data/tokenizers/tokenizer_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/tokenizers/gpt2_bpe_tokenizer.h"
#include "data/tokenizers/hf_tokenizer.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "data/tokenizers/simple_tokenizers.h"
#include "data/tokenizers/tiktoken_tokenizer.h"

namespace conveyor {
namespace {

constexpr int64_t kMegatronTiktokenVocabSize = 131072;  // 2**17, Megatron's fallback

template <typename T>
std::unique_ptr<Tokenizer> Upcast(std::unique_ptr<T> t) {
  return std::unique_ptr<Tokenizer>(std::move(t));
}

// The tokenizers that read --tokenizer-model.
absl::StatusOr<std::unique_ptr<Tokenizer>> BuildFromModelFile(const TokenizerSpec& spec) {
  if (spec.tokenizer_model.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-model is missing: --tokenizer-type ", spec.type, " needs ",
        spec.type == "HuggingFaceTokenizer" ? "a tokenizer.json (or the folder holding it)"
        : spec.type == "TikTokenizer"       ? "a rank file"
                                            : "a SentencePiece tokenizer.model"));
  }
  if (spec.type == "HuggingFaceTokenizer") {
    ASSIGN_OR_RETURN(auto t, HfTokenizer::Load(spec.tokenizer_model), _ << "--tokenizer-model");
    return Upcast(std::move(t));
  }
  if (spec.type == "TikTokenizer") {
    if (spec.tiktoken_pattern.empty()) {
      return absl::InvalidArgumentError(
          "--tiktoken-pattern is missing: --tokenizer-type TikTokenizer needs v1 or v2");
    }
    TikTokenSpec tiktoken{spec.tokenizer_model, spec.tiktoken_pattern,
                          spec.tiktoken_num_special_tokens,
                          spec.vocab_size > 0 ? spec.vocab_size : kMegatronTiktokenVocabSize};
    ASSIGN_OR_RETURN(auto t, TikTokenizer::Load(tiktoken), _ << "--tokenizer-model");
    return Upcast(std::move(t));
  }
  using Flavor = SentencePieceTokenizer::Flavor;
  const Flavor flavor = spec.type == "SentencePieceTokenizer"      ? Flavor::kMegatron
                        : spec.type == "GPTSentencePieceTokenizer" ? Flavor::kGpt
                                                                   : Flavor::kLlama2;
  ASSIGN_OR_RETURN(auto t,
                   SentencePieceTokenizer::Load(spec.tokenizer_model, flavor, spec.vocab_extra_ids),
                   _ << "--tokenizer-model");
  return Upcast(std::move(t));
}

bool ReadsModelFile(const std::string& type) {
  return type == "HuggingFaceTokenizer" || type == "SentencePieceTokenizer" ||
         type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer" || type == "TikTokenizer";
}

// A file flag the chosen tokenizer does not read is refused: Megatron ignores
// it, which hides a mistyped --tokenizer-type.
absl::Status RefuseUnreadFiles(const TokenizerSpec& spec) {
  const bool model_file = ReadsModelFile(spec.type);
  if (!model_file && !spec.tokenizer_model.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-model is for the tokenizers read from a model file (HuggingFaceTokenizer, "
        "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, TikTokenizer), not ",
        spec.type, "; drop --tokenizer-model"));
  }
  for (const auto& [flag, path] :
       {std::pair{"--vocab-file", &spec.vocab_file}, std::pair{"--merge-file", &spec.merge_file}}) {
    if (model_file && !path->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag,
                                                     " is for GPT2BPETokenizer only: ", spec.type,
                                                     " reads --tokenizer-model; drop ", flag));
    }
  }
  if (spec.vocab_extra_ids != 0 && spec.type != "SentencePieceTokenizer") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-extra-ids is for --tokenizer-type SentencePieceTokenizer only, not ", spec.type));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(const TokenizerSpec& spec) {
  if (spec.type.empty()) return std::unique_ptr<Tokenizer>();
  RETURN_IF_ERROR(RefuseUnreadFiles(spec));
  if (spec.type == "GPT2BPETokenizer") {
    if (spec.vocab_file.empty() || spec.merge_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.vocab_file.empty() ? "--vocab-file" : "--merge-file",
          " is missing: --tokenizer-type GPT2BPETokenizer needs --vocab-file vocab.json and "
          "--merge-file merges.txt"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Gpt2BpeTokenizer> t,
                     Gpt2BpeTokenizer::Load(spec.vocab_file, spec.merge_file),
                     _ << "--vocab-file/--merge-file");
    return Upcast(std::move(t));
  }
  if (spec.type == "NullTokenizer") {
    if (spec.vocab_size <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab-size ", spec.vocab_size,
                       " must be positive with --tokenizer-type NullTokenizer (ids are below it)"));
    }
    return Upcast(std::make_unique<NullTokenizer>(spec.vocab_size));
  }
  if (spec.type == "ByteTokenizer") return Upcast(std::make_unique<ByteTokenizer>());
  if (ReadsModelFile(spec.type)) {
    ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> t, BuildFromModelFile(spec));
    // The model's embedding must have a row for every id the tokenizer makes.
    if (spec.type != "TikTokenizer" && spec.vocab_size > 0 && t->vocab_size() > spec.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tokenizer-model ", spec.tokenizer_model, ": the vocabulary holds ", t->vocab_size(),
          " tokens, more than --vocab-size ", spec.vocab_size, "; raise --vocab-size to at least ",
          t->vocab_size(), ", or pass --vocab-size 0 to take the tokenizer's"));
    }
    return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--tokenizer-type ", spec.type,
      " is not known: use GPT2BPETokenizer, NullTokenizer, ByteTokenizer, HuggingFaceTokenizer, "
      "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer or TikTokenizer"));
}

}  // namespace conveyor
