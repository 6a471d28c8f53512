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
#include "data/gpt2_bpe_tokenizer.h"
#include "data/preprocess.h"
#include "data/simple_tokenizers.h"

namespace conveyor {
namespace {

constexpr char kUsage[] =
    "usage: preprocess --input FILE.jsonl --output-prefix PREFIX\n"
    "  [--tokenizer-type GPT2BPETokenizer|NullTokenizer|ByteTokenizer]\n"
    "  [--vocab-file vocab.json --merge-file merges.txt]  (GPT2BPETokenizer, the default)\n"
    "  [--vocab-size N]               (NullTokenizer: ids below N; its eod is N)\n"
    "  [--json-keys KEY...] [--append-eod] [--workers N]\n"
    "  [--skip-bad-lines] [--log-interval DOCUMENTS]\n"
    "Writes PREFIX_<KEY>_document.bin/.idx for each key, as Megatron's\n"
    "tools/preprocess_data.py does. A key's value is a string (one sequence) or a\n"
    "list of strings (the document's sentences, one sequence each). A bad line\n"
    "(not UTF-8, not a JSON object, a key missing) stops the run; --skip-bad-lines\n"
    "reports and drops it instead. --log-interval is the number of documents\n"
    "between progress lines (default 1000, as Megatron's).\n";

constexpr const char* kFlagNames[] = {"--help",           "--input",        "--output-prefix",
                                      "--tokenizer-type", "--vocab-file",   "--merge-file",
                                      "--vocab-size",     "--json-keys",    "--append-eod",
                                      "--workers",        "--log-interval", "--skip-bad-lines"};

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
      {"--tokenizer-model",
       "it names a SentencePiece, Hugging Face or tiktoken model, and preprocess has only "
       "GPT2BPETokenizer (--vocab-file, --merge-file), NullTokenizer and ByteTokenizer. Drop "
       "the flag and pick one of those with --tokenizer-type"},
      {"--dataset-impl",
       "older Megatron chose the file format with it (mmap, lazy, cached); the mmap .bin/.idx "
       "format, the only one Megatron writes today, is the only one here. Drop the flag"},
      {"--vocab-extra-ids",
       "it adds T5's sentinel tokens to the vocabulary, and the GPT tokenizers here have none. "
       "Drop the flag"},
  };
  return *flags;
}

std::string UnknownFlagMessage(absl::string_view flag) {
  const auto& megatron_only = MegatronOnlyFlags();
  if (auto it = megatron_only.find(flag); it != megatron_only.end()) {
    return absl::StrCat("Megatron's ", flag, " has no counterpart here: ", it->second);
  }
  // Megatron's argparse takes any unambiguous abbreviation (old scripts pass
  // --vocab for --vocab-file); name the flags meant instead of guessing.
  std::vector<std::string> meant;
  if (flag.size() > 2 && absl::StartsWith(flag, "--")) {
    for (absl::string_view name : kFlagNames) {
      if (absl::StartsWith(name, flag)) meant.emplace_back(name);
    }
  }
  if (!meant.empty()) {
    return absl::StrCat("unknown flag ", flag, ": did you mean ", absl::StrJoin(meant, " or "),
                        "? (Megatron's argparse takes abbreviations; preprocess takes whole flag "
                        "names)");
  }
  return absl::StrCat("unknown flag ", flag);
}

struct Flags {
  PreprocessOptions options;
  std::string tokenizer_type = "GPT2BPETokenizer";
  std::string vocab_file;
  std::string merge_file;
  std::optional<int64_t> vocab_size;
  bool help = false;
};

absl::Status PositiveInteger(absl::string_view flag, const std::string& text, int64_t* out,
                             absl::string_view meaning = "") {
  if (absl::SimpleAtoi(text, out) && *out > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " needs a positive integer", meaning, ", got '", text, "'"));
}

absl::Status ParseFlags(int argc, char** argv, Flags* flags) {
  PreprocessOptions& options = flags->options;
  bool keys_given = false;
  for (int i = 1; i < argc; ++i) {
    // argparse's --flag=value spelling is taken too.
    std::string flag = argv[i];
    std::optional<std::string> attached;
    if (const size_t eq = flag.find('='); absl::StartsWith(flag, "--") && eq != flag.npos) {
      attached = flag.substr(eq + 1);
      flag.resize(eq);
    }
    auto value = [&](std::string* out) {
      if (attached) {
        *out = *attached;
      } else if (i + 1 < argc) {
        *out = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      }
      return absl::OkStatus();
    };
    auto positive = [&](int64_t* out, absl::string_view meaning = "") {
      std::string text;
      absl::Status s = value(&text);
      return s.ok() ? PositiveInteger(flag, text, out, meaning) : s;
    };
    absl::Status status;
    if (attached && (flag == "--help" || flag == "--append-eod" || flag == "--skip-bad-lines")) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " takes no value"));
    }
    if (flag == "--help" || flag == "-h") {
      flags->help = true;
    } else if (flag == "--input") {
      status = value(&options.input);
    } else if (flag == "--output-prefix") {
      status = value(&options.output_prefix);
    } else if (flag == "--tokenizer-type") {
      status = value(&flags->tokenizer_type);
    } else if (flag == "--vocab-file") {
      status = value(&flags->vocab_file);
    } else if (flag == "--merge-file") {
      status = value(&flags->merge_file);
    } else if (flag == "--vocab-size") {
      int64_t n = 0;
      status = positive(&n, " (NullTokenizer's ids are below it)");
      flags->vocab_size = n;
    } else if (flag == "--json-keys") {
      // Like Megatron's nargs='+': every following word up to the next flag.
      options.json_keys.clear();
      std::vector<std::string> words;
      if (attached) words.push_back(*attached);
      while (!attached && i + 1 < argc && !absl::StartsWith(argv[i + 1], "--")) {
        words.push_back(argv[++i]);
      }
      for (const std::string& word : words) {
        for (absl::string_view k : absl::StrSplit(word, ',', absl::SkipEmpty())) {
          options.json_keys.emplace_back(k);
        }
      }
      keys_given = true;
    } else if (flag == "--append-eod") {
      options.append_eod = true;
    } else if (flag == "--skip-bad-lines") {
      options.skip_bad_lines = true;
    } else if (flag == "--workers") {
      int64_t n = 0;
      status = positive(&n);
      options.workers = int(std::min<int64_t>(n, 1 << 16));
    } else if (flag == "--log-interval") {
      // Megatron divides the document count by it, so 0 fails there too.
      status =
          positive(&options.log_interval, " (documents between progress lines, as Megatron's)");
    } else {
      return absl::InvalidArgumentError(UnknownFlagMessage(flag));
    }
    if (!status.ok()) return status;
  }
  if (flags->help) return absl::OkStatus();
  if (options.input.empty()) return absl::InvalidArgumentError("--input is required");
  if (options.output_prefix.empty()) {
    return absl::InvalidArgumentError("--output-prefix is required");
  }
  if (keys_given && options.json_keys.empty()) {
    return absl::InvalidArgumentError("--json-keys needs at least one key");
  }
  return absl::OkStatus();
}

// A tokenizer flag the chosen tokenizer does not read is refused: Megatron
// ignores it, which hides mistakes such as a --vocab-size meant to change
// GPT-2's vocabulary.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const Flags& flags) {
  const std::string& type = flags.tokenizer_type;
  const bool gpt2 = type == "GPT2BPETokenizer", null = type == "NullTokenizer";
  if (!gpt2 && !null && type != "ByteTokenizer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer-type ", type,
                     " is not one preprocess has: pick GPT2BPETokenizer, NullTokenizer or "
                     "ByteTokenizer"));
  }
  if (flags.vocab_size && !null) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab-size is for NullTokenizer only: ", type, "'s vocabulary ",
                     gpt2 ? "is the one in --vocab-file" : "is fixed (256 bytes and eod)",
                     "; drop --vocab-size"));
  }
  for (const auto& [flag, path] : {std::pair{"--vocab-file", &flags.vocab_file},
                                   std::pair{"--merge-file", &flags.merge_file}}) {
    if (!gpt2 && !path->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " is for GPT2BPETokenizer only: ", type,
                                                     " reads no files; drop ", flag));
    }
  }
  if (gpt2) {
    if (flags.vocab_file.empty() || flags.merge_file.empty()) {
      return absl::InvalidArgumentError(
          "--tokenizer-type GPT2BPETokenizer (the default) needs --vocab-file vocab.json and "
          "--merge-file merges.txt");
    }
    absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> t =
        Gpt2BpeTokenizer::Load(flags.vocab_file, flags.merge_file);
    if (!t.ok()) return t.status();
    return std::unique_ptr<Tokenizer>(*std::move(t));
  }
  if (null) {
    if (!flags.vocab_size) {
      return absl::InvalidArgumentError(
          "--tokenizer-type NullTokenizer needs --vocab-size N (its ids are below N; its eod is "
          "N)");
    }
    return std::unique_ptr<Tokenizer>(std::make_unique<NullTokenizer>(*flags.vocab_size));
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
}

int UsageError(const absl::Status& status) {
  std::fprintf(stderr, "preprocess: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
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
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeTokenizer(flags);
  if (!tokenizer.ok()) return UsageError(tokenizer.status());
  absl::StatusOr<PreprocessSummary> summary = Preprocess(flags.options, **tokenizer);
  if (!summary.ok()) {
    std::fprintf(stderr, "preprocess: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  PrintSummary(*summary, flags.options.workers);
  return 0;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) { return conveyor::Main(argc, argv); }
