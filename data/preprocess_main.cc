// preprocess: JSON lines -> Megatron .bin/.idx, with Megatron's flag names.
//
//   preprocess --input corpus.jsonl --output-prefix out/corpus
//       --tokenizer-type GPT2BPETokenizer --vocab-file vocab.json
//       --merge-file merges.txt --json-keys text --append-eod --workers 8
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/exit_code.h"
#include "base/status_macros.h"
#include "data/preprocess.h"
#include "data/tokenizer_settings.h"
#include "data/tokenizers/tokenizer_factory.h"
#include "flags/proto_flags.h"
#include "proto/tools.pb.h"

namespace conveyor {
namespace {

constexpr char kUsageHead[] =
    "usage: preprocess --input FILE.jsonl --output-prefix PREFIX [--flag VALUE | --flag=VALUE]...\n"
    "Writes PREFIX_<KEY>_document.bin/.idx for each key, as Megatron's\n"
    "tools/preprocess_data.py does. Boolean flags: --flag sets true, --flag=false clears.\n"
    "\n";

constexpr char kWorkersInstead[] =
    "Megatron times runs with several worker counts; here, run with a few --workers values and "
    "compare the MB/s on the done: line. Drop the flag";

// Flags of Megatron's preprocess_data.py that have no counterpart here, each
// with why and what to do instead, so that a Megatron script fails with the
// fix rather than a bare "unknown flag".
const std::map<std::string, std::string, std::less<>>& MegatronOnlyFlags() {
  static const auto* flags = new std::map<std::string, std::string, std::less<>>{
      {"--split-sentences",
       "it splits documents into sentences with NLTK (for BERT-style training) and writes "
       "PREFIX_<KEY>_sentence files, while GPT training reads whole documents. Drop the flag; "
       "to keep sentence boundaries, give the field as a JSON list of sentences, which is "
       "stored one sequence per sentence, as Megatron stores split ones"},
      {"--keep-newlines",
       "it only changes how --split-sentences splits, which has no counterpart here; newlines "
       "in the text are tokenized as they are, as in Megatron without splitting. Drop the flag"},
      {"--lang",
       "it names the NLTK language for --split-sentences, which has no counterpart here. Drop "
       "the flag"},
      {"--partitions",
       "Megatron splits the input into N files, processes each separately and merges them, "
       "dealing lines out round-robin, so documents leave input order (unless "
       "--keep-sequential-samples); here --workers threads share one pass and documents keep "
       "the input order, Megatron's --partitions 1 output. Drop the flag and set --workers"},
      {"--keep-sequential-samples",
       "it keeps the input order under --partitions; here documents always keep it. Drop the "
       "flag"},
      {"--find-optimal-num-workers", kWorkersInstead},
      {"--workers-to-check", kWorkersInstead},
      {"--max-documents", kWorkersInstead},
      {"--performance-dir", kWorkersInstead},
      {"--dataset-impl",
       "older Megatron chose the file format with it (mmap, lazy, cached); the mmap .bin/.idx "
       "format, the only one Megatron writes today, is the only one here. Drop the flag"},
  };
  return *flags;
}

// Megatron's flags with no counterpart, and argparse's abbreviations (old scripts
// pass --vocab for --vocab-file): name the flags meant instead of guessing.
std::optional<std::string> KnownUnknownFlag(const std::string& arg, const std::string& wanted) {
  const auto& megatron_only = MegatronOnlyFlags();
  if (auto it = megatron_only.find(wanted); it != megatron_only.end()) {
    return absl::StrCat("Megatron's ", arg, " has no counterpart here: ", it->second);
  }
  std::vector<std::string> meant;
  if (wanted.size() > 2) {
    for (const FlagField& f :
         CollectFlagFields(*tools::PreprocessOptions::descriptor(), /*grouped=*/false)) {
      const std::string name = FlagName(*f.field);
      if (absl::StartsWith(name, wanted)) meant.push_back(name);
    }
  }
  if (!meant.empty()) {
    return absl::StrCat("unknown flag ", arg, ": did you mean ", absl::StrJoin(meant, " or "),
                        "? (Megatron's argparse takes abbreviations; preprocess takes whole flag "
                        "names)");
  }
  return std::nullopt;
}

// The flags come from PreprocessOptions (proto/tools.proto).
const FlagSpec& PreprocessFlags() {
  static const auto* const spec = [] {
    auto* sp = new FlagSpec();
    sp->fields = CollectFlagFields(*tools::PreprocessOptions::descriptor(), /*grouped=*/false);
    sp->unknown_flag = KnownUnknownFlag;
    return sp;
  }();
  return *spec;
}

std::string Usage() {
  std::string out = kUsageHead;
  for (const FlagField& f : PreprocessFlags().fields) AppendFieldHelp(*f.field, &out);
  AppendHelpEntry("--help, -h", "", "Print this help and exit.", &out);
  return out;
}

struct Flags {
  PreprocessOptions options;
  // The tokenizer's settings as the trainer's (a field is set when its flag was given).
  DataConfig tokenizer;
  std::optional<int64_t> vocab_size;
  bool help = false;
};

absl::Status PositiveInteger(absl::string_view flag, int64_t value,
                             absl::string_view meaning = "") {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " needs a positive integer", meaning, ", got '", value, "'"));
}

// Parses with the shared parser, then checks preprocess's own rules.
absl::Status ParseFlags(int argc, char** argv, Flags* flags) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (WantsHelp(args)) {
    flags->help = true;
    return absl::OkStatus();
  }
  tools::PreprocessOptions parsed;
  std::set<const google::protobuf::FieldDescriptor*> given;
  std::vector<std::string> problems = ParseFlagsInto(PreprocessFlags(), args, &parsed, &given);
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  const auto* d = tools::PreprocessOptions::descriptor();
  auto was_given = [&](const char* name) { return given.count(d->FindFieldByName(name)) != 0; };
  PreprocessOptions& options = flags->options;
  options.input = parsed.input();
  options.output_prefix = parsed.output_prefix();
  flags->tokenizer = parsed.tokenizer();
  if (flags->tokenizer.vocab_extra_ids() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab-extra-ids needs a non-negative integer, got '",
                     flags->tokenizer.vocab_extra_ids(), "'"));
  }
  if (was_given("vocab_size")) {
    if (absl::Status s = PositiveInteger("--vocab-size", parsed.vocab_size(),
                                         " (NullTokenizer's ids are below it)");
        !s.ok()) {
      return s;
    }
    flags->vocab_size = parsed.vocab_size();
  }
  if (was_given("json_keys")) {
    // Like Megatron's nargs='+'; a word may also hold several keys, comma-separated.
    options.json_keys.clear();
    for (const std::string& word : parsed.json_keys()) {
      for (absl::string_view k : absl::StrSplit(word, ',', absl::SkipEmpty())) {
        options.json_keys.emplace_back(k);
      }
    }
  }
  options.append_eod = parsed.append_eod();
  options.skip_bad_lines = parsed.skip_bad_lines();
  if (was_given("workers")) {
    if (absl::Status s = PositiveInteger("--workers", parsed.workers()); !s.ok()) return s;
    options.workers = std::min(parsed.workers(), 1 << 16);
  }
  // Megatron divides the document count by it, so 0 fails there too.
  if (absl::Status s = PositiveInteger("--log-interval", parsed.log_interval(),
                                       " (documents between progress lines, as Megatron's)");
      !s.ok()) {
    return s;
  }
  options.log_interval = parsed.log_interval();
  if (options.input.empty()) return absl::InvalidArgumentError("--input is required");
  if (options.output_prefix.empty()) {
    return absl::InvalidArgumentError("--output-prefix is required");
  }
  if (was_given("json_keys") && options.json_keys.empty()) {
    return absl::InvalidArgumentError("--json-keys needs at least one key");
  }
  return absl::OkStatus();
}

// A tokenizer flag the chosen tokenizer does not read is refused: Megatron
// ignores it, which hides mistakes such as a --vocab-size meant to change
// GPT-2's vocabulary. The factory refuses the rest (--tokenizer-model for a
// tokenizer without one, the files for one that reads --tokenizer-model); these
// are preprocess's own, as for the trainer --vocab-size also sizes the model.
absl::Status RefuseUnreadFlags(const Flags& flags) {
  const DataConfig& given = flags.tokenizer;
  const std::string type = EffectiveTokenizerType(given);
  if (type.empty()) {
    return absl::InvalidArgumentError(
        "--tokenizer-type is required (GPT2BPETokenizer is taken when --vocab-file or "
        "--merge-file is given), as in Megatron's tools/preprocess_data.py");
  }
  auto refuse = [&](const char* flag, const char* reader) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " is for ", reader, " only, not ", type,
                                                   "; drop ", flag));
  };
  if (type != "TikTokenizer") {
    if (given.has_tiktoken_pattern()) return refuse("--tiktoken-pattern", "TikTokenizer");
    if (given.has_tiktoken_num_special_tokens()) {
      return refuse("--tiktoken-num-special-tokens", "TikTokenizer");
    }
  }
  if (given.has_vocab_extra_ids() && type != "SentencePieceTokenizer") {
    return refuse("--vocab-extra-ids", "SentencePieceTokenizer");
  }
  const bool gpt2 = type == "GPT2BPETokenizer", null = type == "NullTokenizer";
  const bool simple = gpt2 || null || type == "ByteTokenizer";
  if (flags.vocab_size && !null && type != "TikTokenizer") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-size is for NullTokenizer", simple ? "" : " and TikTokenizer", " only: ", type,
        "'s vocabulary ",
        gpt2     ? "is the one in --vocab-file"
        : simple ? "is fixed (256 bytes and eod)"
                 : "is the one in --tokenizer-model",
        "; drop --vocab-size"));
  }
  for (const auto& [flag, path] : {std::pair{"--vocab-file", &given.vocab_file()},
                                   std::pair{"--merge-file", &given.merge_file()}}) {
    if (simple && !gpt2 && !path->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " is for GPT2BPETokenizer only: ", type,
                                                     " reads no files; drop ", flag));
    }
  }
  return absl::OkStatus();
}

// Built by the factory the trainer uses, once preprocess's own refusals pass.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const Flags& flags) {
  RETURN_IF_ERROR(RefuseUnreadFlags(flags));
  return BuildTokenizer(TokenizerSpecOf(flags.tokenizer, flags.vocab_size.value_or(0)));
}

int UsageError(const absl::Status& status) {
  // One "preprocess: " line per problem.
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    std::fprintf(stderr, "preprocess: %s\n", std::string(line).c_str());
  }
  // Not the whole help: it would push the problems off the screen.
  std::fputs("preprocess: run with --help to list every flag\n", stderr);
  return kExitUsage;
}

void PrintSummary(const PreprocessSummary& s, int workers) {
  const double secs = std::max(s.seconds, 1e-9);
  std::printf(
      "done: %lld documents, %lld tokens (%s), %lld bad lines skipped\n"
      "      %.2f MB of JSON in %.2f s: %.2f MB/s, %.0f docs/s, %.0f tokens/s, %d workers\n",
      static_cast<long long>(s.documents), static_cast<long long>(s.tokens),
      std::string(TokenDTypeName(s.dtype)).c_str(), static_cast<long long>(s.skipped_lines),
      s.input_bytes / 1e6, s.seconds, s.input_bytes / secs / 1e6, s.documents / secs,
      s.tokens / secs, workers);
  for (const std::string& p : s.output_prefixes) std::printf("wrote %s.bin/.idx\n", p.c_str());
}

int Main(int argc, char** argv) {
  Flags flags;
  flags.options.workers = std::max(1u, std::thread::hardware_concurrency());
  if (absl::Status s = ParseFlags(argc, argv, &flags); !s.ok()) return UsageError(s);
  if (flags.help) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeTokenizer(flags);
  if (!tokenizer.ok()) return UsageError(tokenizer.status());
  absl::StatusOr<PreprocessSummary> summary = Preprocess(flags.options, **tokenizer);
  if (!summary.ok()) {
    std::fprintf(stderr, "preprocess: %s\n", std::string(summary.status().message()).c_str());
    return ExitCodeFor(summary.status());
  }
  PrintSummary(*summary, flags.options.workers);
  return 0;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) { return conveyor::Main(argc, argv); }
