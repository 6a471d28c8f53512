// preprocess: JSON lines -> Megatron .bin/.idx, with Megatron's flag names.
//
//   preprocess --input corpus.jsonl --output-prefix out/corpus
//       --tokenizer-type GPT2BPETokenizer --vocab-file vocab.json
//       --merge-file merges.txt --json-keys text --append-eod --workers 8
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/preprocess.h"
#include "data/simple_tokenizers.h"

namespace conveyor {
namespace {

constexpr char kUsage[] =
    "usage: preprocess --input FILE.jsonl --output-prefix PREFIX\n"
    "  [--tokenizer-type GPT2BPETokenizer|NullTokenizer|ByteTokenizer]\n"
    "  [--vocab-file vocab.json --merge-file merges.txt]  (GPT2BPETokenizer)\n"
    "  [--vocab-size N]                                     (NullTokenizer)\n"
    "  [--json-keys KEY...] [--append-eod] [--workers N]\n"
    "  [--skip-bad-lines] [--log-interval SECONDS]\n"
    "Writes PREFIX_<key>_document.bin/.idx for each key.\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "preprocess: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

int Main(int argc, char** argv) {
  PreprocessOptions options;
  options.workers = std::max(1u, std::thread::hardware_concurrency());
  std::string tokenizer_type = "GPT2BPETokenizer", vocab_file, merge_file;
  int64_t vocab_size = -1;
  bool keys_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (flag == "--input") {
      if (!value(&options.input)) return Fail("--input needs a value");
    } else if (flag == "--output-prefix") {
      if (!value(&options.output_prefix)) return Fail("--output-prefix needs a value");
    } else if (flag == "--tokenizer-type") {
      if (!value(&tokenizer_type)) return Fail("--tokenizer-type needs a value");
    } else if (flag == "--vocab-file") {
      if (!value(&vocab_file)) return Fail("--vocab-file needs a value");
    } else if (flag == "--merge-file") {
      if (!value(&merge_file)) return Fail("--merge-file needs a value");
    } else if (flag == "--vocab-size") {
      if (!value(&v) || !absl::SimpleAtoi(v, &vocab_size) || vocab_size <= 0) {
        return Fail("--vocab-size needs a positive integer");
      }
    } else if (flag == "--json-keys") {
      // Like Megatron's nargs='+': every following word up to the next flag.
      options.json_keys.clear();
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
        for (absl::string_view k : absl::StrSplit(argv[++i], ',', absl::SkipEmpty())) {
          options.json_keys.emplace_back(k);
        }
      }
      keys_given = true;
    } else if (flag == "--append-eod") {
      options.append_eod = true;
    } else if (flag == "--skip-bad-lines") {
      options.skip_bad_lines = true;
    } else if (flag == "--workers") {
      if (!value(&v) || !absl::SimpleAtoi(v, &options.workers) || options.workers < 1) {
        return Fail("--workers needs a positive integer");
      }
    } else if (flag == "--log-interval") {
      if (!value(&v) || !absl::SimpleAtod(v, &options.log_interval_s)) {
        return Fail("--log-interval needs a number of seconds");
      }
    } else {
      return Fail("unknown flag " + flag);
    }
  }
  if (options.input.empty()) return Fail("--input is required");
  if (options.output_prefix.empty()) return Fail("--output-prefix is required");
  if (keys_given && options.json_keys.empty()) return Fail("--json-keys needs at least one key");

  std::unique_ptr<Tokenizer> tokenizer;
  if (tokenizer_type == "GPT2BPETokenizer") {
    if (vocab_file.empty() || merge_file.empty()) {
      return Fail("GPT2BPETokenizer needs --vocab-file and --merge-file");
    }
    auto t = Gpt2BpeTokenizer::Load(vocab_file, merge_file);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    tokenizer = *std::move(t);
  } else if (tokenizer_type == "NullTokenizer") {
    if (vocab_size <= 0) return Fail("NullTokenizer needs --vocab-size");
    tokenizer = std::make_unique<NullTokenizer>(vocab_size);
  } else if (tokenizer_type == "ByteTokenizer") {
    tokenizer = std::make_unique<ByteTokenizer>();
  } else {
    return Fail("unknown --tokenizer-type " + tokenizer_type);
  }

  absl::StatusOr<PreprocessSummary> s = Preprocess(options, *tokenizer);
  if (!s.ok()) {
    std::fprintf(stderr, "preprocess: %s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  const double secs = std::max(s->seconds, 1e-9);
  std::printf(
      "done: %lld documents, %lld tokens (%s), %lld malformed lines skipped\n"
      "      %.2f MB of JSON in %.2f s: %.2f MB/s, %.0f docs/s, %.0f tokens/s, %d workers\n",
      static_cast<long long>(s->documents), static_cast<long long>(s->tokens),
      std::string(TokenDTypeName(s->dtype)).c_str(), static_cast<long long>(s->skipped_lines),
      s->input_bytes / 1e6, s->seconds, s->input_bytes / secs / 1e6, s->documents / secs,
      s->tokens / secs, options.workers);
  for (const std::string& p : s->output_prefixes) std::printf("wrote %s.bin/.idx\n", p.c_str());
  return 0;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) { return conveyor::Main(argc, argv); }
