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
#include "data/blend.h"
#include "data/indexed_dataset.h"
#include "data/training_data.h"
#include "proto/config.pb.h"

namespace conveyor {
namespace {

constexpr char kUsage[] =
    "usage: inspect_data --data-path [W1] PREFIX1 [[W2] PREFIX2 ...]\n"
    "  [--split 969,30,1] [--seq-length 128] [--seed 1234]\n"
    "  [--num-samples 4]    samples of the train split to print\n"
    "  [--train-samples N]  samples the run requests (train-iters * global-batch-size);\n"
    "                       the order depends on it, as in Megatron (default: --num-samples)\n"
    "  [--data-cache-path DIR]  build (or load) the index cache a run will use\n"
    "  [--decode --tokenizer-type GPT2BPETokenizer|NullTokenizer|ByteTokenizer\n"
    "   [--vocab-file vocab.json --merge-file merges.txt] [--vocab-size N]]\n";

int Usage(const std::string& msg) {
  std::fprintf(stderr, "inspect_data: %s\n%s", msg.c_str(), kUsage);
  return 2;
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

int Main(int argc, char** argv) {
  Config config;
  DataConfig& data = *config.mutable_data();
  int64_t num_samples = 4, train_samples = -1, seed = 1234, seq_length = 128, vocab_size = 0;
  bool decode = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    std::string v;
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto integer = [&](int64_t* out, int64_t min,
                       int64_t max = std::numeric_limits<int64_t>::max()) {
      return value(&v) && absl::SimpleAtoi(v, out) && *out >= min && *out <= max;
    };
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (flag == "--data-path") {
      // Megatron's nargs='*': every value up to the next flag.
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
        data.add_data_path(argv[++i]);
      }
      if (data.data_path_size() == 0) return Usage("--data-path needs a dataset prefix");
    } else if (flag == "--split") {
      if (!value(&v)) return Usage("--split needs a value such as 949,50,1");
      data.set_split(v);
    } else if (flag == "--seq-length") {
      if (!integer(&seq_length, 1, kInt32Max)) {
        return Usage("--seq-length needs a positive integer below 2^31");
      }
    } else if (flag == "--seed") {
      if (!integer(&seed, 0)) return Usage("--seed needs a non-negative integer");
    } else if (flag == "--num-samples") {
      if (!integer(&num_samples, 0)) return Usage("--num-samples needs a non-negative integer");
    } else if (flag == "--train-samples") {
      if (!integer(&train_samples, 1)) return Usage("--train-samples needs a positive integer");
    } else if (flag == "--data-cache-path") {
      if (!value(&v)) return Usage("--data-cache-path needs a folder");
      data.set_data_cache_path(v);
    } else if (flag == "--decode") {
      decode = true;
    } else if (flag == "--tokenizer-type") {
      if (!value(&v)) return Usage("--tokenizer-type needs a value");
      data.set_tokenizer_type(v);
    } else if (flag == "--vocab-file") {
      if (!value(&v)) return Usage("--vocab-file needs a path");
      data.set_vocab_file(v);
    } else if (flag == "--merge-file") {
      if (!value(&v)) return Usage("--merge-file needs a path");
      data.set_merge_file(v);
    } else if (flag == "--vocab-size") {
      if (!integer(&vocab_size, 1, kInt32Max)) {
        return Usage("--vocab-size needs a positive integer below 2^31");
      }
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  if (data.data_path_size() == 0) return Usage("--data-path is required");
  if (decode && data.tokenizer_type().empty()) {
    return Usage("--decode needs --tokenizer-type (and its files)");
  }
  if (train_samples < 0) train_samples = std::max<int64_t>(num_samples, 1);
  if (num_samples > train_samples) {
    return Usage(absl::StrCat("--num-samples ", num_samples, " is more than --train-samples ",
                              train_samples));
  }
  config.mutable_model()->set_seq_length(int32_t(seq_length));
  if (vocab_size > 0) {
    config.mutable_model()->set_vocab_size(int32_t(vocab_size));
  } else if (data.tokenizer_type().empty()) {
    // Without a tokenizer nothing here needs a vocabulary; any size will do.
    config.mutable_model()->set_vocab_size(1);
  }
  config.mutable_training()->set_seed(seed);

  // Per-file summary, from the same blend parsing the trainer uses.
  absl::StatusOr<Blend> blend = ParseBlend(
      std::vector<std::string>(data.data_path().begin(), data.data_path().end()), "--data-path");
  if (!blend.ok()) return Usage(std::string(blend.status().message()));
  const std::vector<double> shares =
      blend->weighted() ? NormalizeWeights(blend->weights) : std::vector<double>();
  int64_t documents = 0, sequences = 0, tokens = 0;
  for (size_t d = 0; d < blend->prefixes.size(); ++d) {
    if (absl::Status st = CheckDatasetPrefix(blend->prefixes[d], "--data-path"); !st.ok()) {
      std::fprintf(stderr, "inspect_data: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    auto ds = IndexedDataset::Open(blend->prefixes[d]);
    if (!ds.ok()) {
      std::fprintf(stderr, "inspect_data: --data-path: %s\n",
                   std::string(ds.status().message()).c_str());
      return 1;
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

  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = ResolveVocabulary(&config);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "inspect_data: %s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  // Shows the ids the files hold, whatever the vocabulary (the trainer checks them).
  TrainingDataOptions options;
  options.check_token_ids = false;
  options.sample_count_flags[0] = "--train-samples (default: --num-samples)";
  absl::StatusOr<DataSplits> splits =
      BuildTrainingData(config, train_samples, 0, 0, /*build_cache_here=*/true, options);
  if (!splits.ok()) {
    std::fprintf(stderr, "inspect_data: %s\n", std::string(splits.status().message()).c_str());
    return 1;
  }
  std::printf(
      "train split: --split %s, --seq-length %lld, --seed %lld, %lld samples requested, "
      "%lld built\n",
      data.split().c_str(), (long long)seq_length, (long long)seed, (long long)train_samples,
      (long long)splits->train->size());
  for (int64_t i = 0; i < num_samples; ++i) {
    absl::StatusOr<std::vector<int32_t>> sample = splits->train->Sample(i);
    if (!sample.ok()) {
      std::fprintf(stderr, "inspect_data: sample %lld: %s\n", (long long)i,
                   std::string(sample.status().message()).c_str());
      return 1;
    }
    if (decode) {
      absl::StatusOr<std::string> text = (*tokenizer)->Detokenize(*sample);
      if (!text.ok()) {
        std::fprintf(stderr, "inspect_data: sample %lld: %s\n", (long long)i,
                     std::string(text.status().message()).c_str());
        return 1;
      }
      std::printf("sample %lld: \"%s\"\n", (long long)i, Escape(*text).c_str());
    } else {
      std::printf("sample %lld: %s\n", (long long)i, absl::StrJoin(*sample, " ").c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) { return conveyor::Main(argc, argv); }
