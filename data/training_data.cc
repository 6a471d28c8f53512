#include "data/training_data.h"

#include <array>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/blend.h"
#include "data/dataset_builder.h"
#include "data/mock_dataset.h"
#include "data/tokenizer_settings.h"
#include "data/tokenizers/tokenizer_factory.h"

namespace conveyor {
namespace {

// Mock splits must not repeat each other's samples; offsetting the seed by a
// large odd constant keeps them apart for every user seed.
constexpr uint64_t kMockSplitSeedStride = 0x9e3779b97f4a7c15ULL;

absl::StatusOr<std::optional<Blend>> OptionalBlend(
    const google::protobuf::RepeatedPtrField<std::string>& words, const char* flag) {
  if (words.empty()) return std::optional<Blend>();
  ASSIGN_OR_RETURN(Blend b, ParseBlend(std::vector<std::string>(words.begin(), words.end()), flag));
  return std::optional<Blend>(std::move(b));
}

// Mock data's splits: samples of ids below the vocabulary's size, each split from a
// seed of its own.
SplitSources MockSources(int64_t seed, int vocab_size, int seq_length,
                         const std::array<int64_t, 3>& sizes) {
  SplitSources sources;
  for (int i = 0; i < 3; ++i) {
    if (sizes[i] == 0) continue;
    const int64_t split_seed = int64_t(uint64_t(seed) + uint64_t(i) * kMockSplitSeedStride);
    sources[i] = std::make_unique<MockSampleSource>(split_seed, vocab_size, seq_length, sizes[i]);
  }
  return sources;
}

// The splits of the datasets the flags name (--data-path with --split, or a path per
// split), each checked by reading its first sample.
absl::StatusOr<SplitSources> FileSources(const Config& resolved_config,
                                         const std::array<int64_t, 3>& sizes,
                                         const TokenIdLimit& token_ids,
                                         const TrainingDataOptions& options) {
  const DataConfig& data = resolved_config.data();
  const int64_t seed = resolved_config.training().seed();
  // Megatron seeds numpy's RandomState with it, which takes 32 bits.
  if (seed < 0 || seed > int64_t{std::numeric_limits<uint32_t>::max()}) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seed ", seed, " must be in [0, 2^32) to shuffle datasets"));
  }
  DatasetBuildConfig build;
  build.sequence_length = resolved_config.model().seq_length();
  build.random_seed = uint32_t(seed);
  build.split = data.split();
  ASSIGN_OR_RETURN(std::optional<Blend> blend, OptionalBlend(data.data_path(), "--data-path"));
  build.blend = std::move(blend);
  const std::array<const google::protobuf::RepeatedPtrField<std::string>*, 3> per_split = {
      &data.train_data_path(), &data.valid_data_path(), &data.test_data_path()};
  const std::array<const char*, 3> flags = {"--train-data-path", "--valid-data-path",
                                            "--test-data-path"};
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(std::optional<Blend> b, OptionalBlend(*per_split[i], flags[i]));
    build.blend_per_split[i] = std::move(b);
  }
  build.cache.path = data.data_cache_path();
  if (options.check_token_ids) build.token_ids = token_ids;
  build.sample_count_flags = options.sample_count_flags;
  ASSIGN_OR_RETURN(SplitSources sources, BuildSplitDatasets(build, sizes));
  if (sizes[0] > 0 && sources[0] == nullptr) {
    // A zero weight (--split 0,0,1) leaves no training split at all.
    return absl::InvalidArgumentError(
        data.data_path_size() > 0
            ? absl::StrCat("--split ", data.split(),
                           " gives the train split no share of --data-path: there is nothing "
                           "to train on; give train a positive weight (e.g. --split 969,30,1)")
            : std::string("--train-data-path is not set: there is nothing to train on; pass "
                          "it (or --data-path with --split)"));
  }
  // A cheap early look (one sample per split): data made with another
  // tokenizer usually shows in its first sample already.
  for (const std::unique_ptr<SampleSource>& source : sources) {
    if (source == nullptr || source->size() == 0) continue;
    if (absl::StatusOr<std::vector<int32_t>> first = source->Sample(0); !first.ok()) {
      return first.status();
    }
  }
  return sources;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> ResolveVocabulary(Config* config) {
  const DataConfig& data = config->data();
  ModelConfig& model = *config->mutable_model();
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                   BuildTokenizer(TokenizerSpecOf(data, model.vocab_size())));
  if (tokenizer != nullptr) {
    model.set_vocab_size(int32_t(tokenizer->vocab_size()));
  } else if (model.vocab_size() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-size ", model.vocab_size(),
        " must be positive without --tokenizer-type: nothing else fixes the vocabulary"));
  }
  return tokenizer;
}

SplitSampleCounts MegatronSampleCounts(int64_t train_iters, int64_t global_batch_size,
                                       int64_t eval_interval, int64_t eval_iters) {
  auto product = [](int64_t a, int64_t b) {
    int64_t p;
    return __builtin_mul_overflow(a, b, &p) ? std::numeric_limits<int64_t>::max() : p;
  };
  SplitSampleCounts c;
  c.train = product(train_iters, global_batch_size);
  c.valid = eval_interval > 0
                ? product(product(train_iters / eval_interval + 1, eval_iters), global_batch_size)
                : 0;
  c.test = product(eval_iters, global_batch_size);
  return c;
}

absl::StatusOr<DataSplits> BuildTrainingData(const Config& resolved_config, int64_t train_samples,
                                             int64_t valid_samples, int64_t test_samples,
                                             const TrainingDataOptions& options) {
  const DataConfig& data = resolved_config.data();
  const ModelConfig& model = resolved_config.model();
  if (model.vocab_size() <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the data's vocabulary is unresolved (--vocab-size ", model.vocab_size(),
                     "): ResolveVocabulary must set it before the data is built"));
  }
  DataSplits out;
  out.token_ids.vocab_size = model.vocab_size();
  out.token_ids.tokenizer_type = data.tokenizer_type();
  if (model.seq_length() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-length ", model.seq_length(), " must be positive"));
  }
  const std::array<int64_t, 3> sizes = {train_samples, valid_samples, test_samples};
  for (int i = 0; i < 3; ++i) {
    if (sizes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kSplitNames[i], " split asked for ", sizes[i], " samples"));
    }
  }
  SplitSources sources;
  if (data.mock_data()) {
    sources = MockSources(resolved_config.training().seed(), int(out.token_ids.vocab_size),
                          model.seq_length(), sizes);
  } else {
    ASSIGN_OR_RETURN(sources, FileSources(resolved_config, sizes, out.token_ids, options));
  }
  out.train = std::move(sources[0]);
  out.valid = std::move(sources[1]);
  out.test = std::move(sources[2]);
  return out;
}

}  // namespace conveyor
