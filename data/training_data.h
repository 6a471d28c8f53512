// The data pipeline's entry points for the trainer: the vocabulary the flags
// name, then, from the config that holds it, the train/validation/test sample
// sources, built the way Megatron's pretrain_gpt builds them (mock data,
// --data-path with --split and optional weights, or --train/valid/test-data-path).
#ifndef CONVEYOR_DATA_TRAINING_DATA_H_
#define CONVEYOR_DATA_TRAINING_DATA_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "data/dataset_builder.h"
#include "data/sample_source.h"
#include "data/token_id_limit.h"
#include "data/tokenizers/tokenizer.h"
#include "proto/config.pb.h"

namespace conveyor {

// The tokenizer --tokenizer-type names (nullptr without one), after setting
// `config`'s --vocab-size to the vocabulary before padding, which the model
// is built for: the tokenizer's (NullTokenizer's is --vocab-size + 1, its eod
// being --vocab-size, as in Megatron), else --vocab-size as given. Call it
// once, on the config the flags give: the vocabulary it sets is no longer a
// flag value (NullTokenizer would count its eod twice). Errors name the flag
// or file that is missing or wrong.
absl::StatusOr<std::unique_ptr<Tokenizer>> ResolveVocabulary(Config* config);

struct DataSplits {
  // A split asked for 0 samples, or with no data named for it, is nullptr.
  std::unique_ptr<SampleSource> train, valid, test;
  // The ids the model has rows for: the resolved config's --vocab-size.
  // Mock data is drawn below it; every sample read from files is checked
  // against it as it is read, so data made with another tokenizer fails with
  // the file, the id and the fix instead of training on ids past the
  // embedding.
  TokenIdLimit token_ids;
};

// Samples each split must provide, as Megatron's
// get_train_valid_test_num_samples computes them; a count past the int64
// range saturates there (and then fails the data's memory check).
struct SplitSampleCounts {
  int64_t train = 0;  // train_iters * global_batch_size
  int64_t valid = 0;  // (train_iters / eval_interval + 1) * eval_iters * global_batch_size
  int64_t test = 0;   // eval_iters * global_batch_size
};
SplitSampleCounts MegatronSampleCounts(int64_t train_iters, int64_t global_batch_size,
                                       int64_t eval_interval, int64_t eval_iters);

struct TrainingDataOptions {
  // False reads whatever ids the files hold (for tools that train nothing).
  bool check_token_ids = true;
  // Named when a split's indices would not fit in memory.
  SampleCountFlags sample_count_flags = TrainerSampleCountFlags();
};

// `resolved_config`: a config ResolveVocabulary has seen, so that its
// --vocab-size is the vocabulary (no tokenizer is built here).
// With --data-cache-path the GPT indices are loaded from there when present,
// else built and written there; nothing here waits for another rank (the
// trainer orders the ranks, trainer/training_data_turns.h). Without it every
// rank builds its own, identical, indices. Errors name the flag and the file
// involved. The first sample of each split is read here, so that
// data outside the vocabulary usually fails before any model is built.
absl::StatusOr<DataSplits> BuildTrainingData(const Config& resolved_config, int64_t train_samples,
                                             int64_t valid_samples, int64_t test_samples,
                                             const TrainingDataOptions& options = {});

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TRAINING_DATA_H_
