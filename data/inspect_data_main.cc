// inspect_data: what a training run will read from a dataset. Prints each
// file's summary (dtype, documents, sequences, tokens, weight) and the first
// samples of the train split, as token ids or decoded text, built exactly as
// the trainer builds them (same split, seed, sequence length and request).
//
//   inspect_data --data-path corpus_text_document --split 949,50,1
//       --seq-length 1024 --seed 1234 --num-samples 4
//       [--decode --tokenizer-type GPT2BPETokenizer --vocab-file vocab.json
//        --merge-file merges.txt]
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/exit_code.h"
#include "data/blend.h"
#include "data/indexed_dataset.h"
#include "data/tokenizer_settings.h"
#include "data/training_data.h"
#include "flags/proto_flags.h"
#include "proto/config.pb.h"
#include "proto/tools.pb.h"

namespace conveyor {
namespace {

constexpr char kUsageHead[] =
    "usage: inspect_data --data-path [W1] PREFIX1 [[W2] PREFIX2 ...] [--flag VALUE | "
    "--flag=VALUE]...\n"
    "Boolean flags: --flag sets true, --flag=false clears.\n"
    "\n";

// The flags come from InspectDataOptions (proto/tools.proto).
const FlagSpec& InspectDataFlags() {
  static const auto* const spec = [] {
    auto* sp = new FlagSpec();
    sp->fields = CollectFlagFields(*tools::InspectDataOptions::descriptor(), /*grouped=*/false);
    return sp;
  }();
  return *spec;
}

std::string UsageText() {
  std::string out = kUsageHead;
  for (const FlagField& f : InspectDataFlags().fields) AppendFieldHelp(*f.field, &out);
  AppendHelpEntry("--help, -h", "", "Print this help and exit.", &out);
  return out;
}

// The problem, then where the flags are listed: the whole help after it would push it
// off the screen.
int Usage(const std::string& msg) {
  std::fprintf(stderr, "inspect_data: %s\ninspect_data: run with --help to list every flag\n",
               msg.c_str());
  return kExitUsage;
}

// A failure reading the data: its message, and the exit code by the project's rule
// (base/exit_code.h): a missing or wrong file is input to change (2), an I/O error not (1).
int Fail(const absl::Status& status, const std::string& context = "") {
  std::fprintf(stderr, "inspect_data: %s%s\n", context.c_str(),
               std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

// Text with control characters escaped, so one sample stays on one line.
std::string Escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrCat("\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(char(c));
    }
  }
  return out;
}

// The samples to build: --train-samples, by default --num-samples (at least one).
int64_t TrainSamples(const tools::InspectDataOptions& flags) {
  return flags.has_train_samples() ? flags.train_samples()
                                   : std::max<int64_t>(flags.num_samples(), 1);
}

// The first flag out of its range or missing, or "" when the flags describe a request.
std::string FlagProblem(const tools::InspectDataOptions& flags) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (flags.seq_length() < 1 || flags.seq_length() > kInt32Max) {
    return "--seq-length needs a positive integer below 2^31";
  }
  if (flags.seed() < 0) return "--seed needs a non-negative integer";
  if (flags.num_samples() < 0) return "--num-samples needs a non-negative integer";
  if (flags.has_train_samples() && flags.train_samples() < 1) {
    return "--train-samples needs a positive integer";
  }
  if (flags.has_vocab_size() && (flags.vocab_size() < 1 || flags.vocab_size() > kInt32Max)) {
    return "--vocab-size needs a positive integer below 2^31";
  }
  if (flags.data_path_size() == 0) return "--data-path is required";
  if (flags.decode() && EffectiveTokenizerType(flags.tokenizer()).empty()) {
    return "--decode needs --tokenizer-type (and its files)";
  }
  if (flags.num_samples() > TrainSamples(flags)) {
    return absl::StrCat("--num-samples ", flags.num_samples(), " is more than --train-samples ",
                        TrainSamples(flags));
  }
  return "";
}

// The trainer's configuration for the data the flags name.
Config ConfigOf(const tools::InspectDataOptions& flags) {
  Config config;
  DataConfig& data = *config.mutable_data();
  data.mutable_data_path()->CopyFrom(flags.data_path());
  data.set_split(flags.split());
  data.set_data_cache_path(flags.data_cache_path());
  data.MergeFrom(flags.tokenizer());
  data.set_tokenizer_type(EffectiveTokenizerType(data));
  config.mutable_model()->set_seq_length(int32_t(flags.seq_length()));
  if (flags.vocab_size() > 0) {
    config.mutable_model()->set_vocab_size(int32_t(flags.vocab_size()));
  } else if (data.tokenizer_type().empty()) {
    // Without a tokenizer nothing here needs a vocabulary; any size will do.
    config.mutable_model()->set_vocab_size(1);
  }
  config.mutable_training()->set_seed(flags.seed());
  return config;
}

// Prints each dataset's summary, from the same blend parsing the trainer uses, and their
// total. Returns 0, or the exit code of the first dataset that cannot be read.
int PrintDatasets(const DataConfig& data) {
  absl::StatusOr<Blend> blend = ParseBlend(
      std::vector<std::string>(data.data_path().begin(), data.data_path().end()), "--data-path");
  if (!blend.ok()) return Usage(std::string(blend.status().message()));
  const std::vector<double> shares =
      blend->weighted() ? NormalizeWeights(blend->weights) : std::vector<double>();
  int64_t documents = 0, sequences = 0, tokens = 0;
  for (size_t d = 0; d < blend->prefixes.size(); ++d) {
    if (absl::Status st = CheckDatasetPrefix(blend->prefixes[d], "--data-path"); !st.ok()) {
      return Fail(st);
    }
    auto ds = IndexedDataset::Open(blend->prefixes[d]);
    if (!ds.ok()) {
      return Fail(ds.status(), "--data-path: ");
    }
    const IndexedDataset& x = **ds;
    std::string weight = "unweighted (blended by size)";
    if (blend->weighted()) {
      weight = absl::StrFormat("weight %g (%.1f%%)", blend->weights[d], 100 * shares[d]);
    } else if (blend->prefixes.size() == 1) {
      weight = "weight 1 (100.0%)";
    }
    std::printf("dataset %s\n  %s, %lld documents, %lld sequences, %lld tokens, %s\n",
                x.path_prefix().c_str(), std::string(TokenDTypeName(x.dtype())).c_str(),
                (long long)x.num_documents(), (long long)x.num_sequences(),
                (long long)x.num_tokens(), weight.c_str());
    documents += x.num_documents();
    sequences += x.num_sequences();
    tokens += x.num_tokens();
  }
  std::printf("total: %zu dataset%s, %lld documents, %lld sequences, %lld tokens\n",
              blend->prefixes.size(), blend->prefixes.size() == 1 ? "" : "s", (long long)documents,
              (long long)sequences, (long long)tokens);
  return 0;
}

// Prints the train split's first --num-samples samples, as ids or (--decode) text.
// Returns 0, or the exit code of the first that cannot be read or decoded.
// `tokenizer` is null when none is named (then --decode is refused before).
int PrintSamples(const tools::InspectDataOptions& flags, const SampleSource& train,
                 const Tokenizer* tokenizer) {
  for (int64_t i = 0; i < flags.num_samples(); ++i) {
    absl::StatusOr<std::vector<int32_t>> sample = train.Sample(i);
    if (!sample.ok()) {
      return Fail(sample.status(), absl::StrCat("sample ", i, ": "));
    }
    if (flags.decode()) {
      absl::StatusOr<std::string> text = tokenizer->Detokenize(*sample);
      if (!text.ok()) {
        return Fail(text.status(), absl::StrCat("sample ", i, ": "));
      }
      std::printf("sample %lld: \"%s\"\n", (long long)i, Escape(*text).c_str());
    } else {
      std::printf("sample %lld: %s\n", (long long)i, absl::StrJoin(*sample, " ").c_str());
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (WantsHelp(args)) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  tools::InspectDataOptions flags;
  std::vector<std::string> problems = ParseFlagsInto(InspectDataFlags(), args, &flags);
  if (!problems.empty()) return Usage(absl::StrJoin(problems, "\ninspect_data: "));
  if (const std::string problem = FlagProblem(flags); !problem.empty()) return Usage(problem);
  Config config = ConfigOf(flags);
  if (const int code = PrintDatasets(config.data()); code != 0) return code;

  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = ResolveVocabulary(&config);
  if (!tokenizer.ok()) {
    return Fail(tokenizer.status());
  }
  // Shows the ids the files hold, whatever the vocabulary (the trainer checks them).
  TrainingDataOptions options;
  options.check_token_ids = false;
  options.sample_count_flags[0] = "--train-samples (default: --num-samples)";
  const int64_t train_samples = TrainSamples(flags);
  absl::StatusOr<DataSplits> splits = BuildTrainingData(config, train_samples, 0, 0, options);
  if (!splits.ok()) {
    return Fail(splits.status());
  }
  std::printf(
      "train split: --split %s, --seq-length %lld, --seed %lld, %lld samples requested, "
      "%lld built\n",
      flags.split().c_str(), (long long)flags.seq_length(), (long long)flags.seed(),
      (long long)train_samples, (long long)splits->train->size());
  return PrintSamples(flags, *splits->train, tokenizer->get());
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) { return conveyor::Main(argc, argv); }
