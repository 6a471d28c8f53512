// One pass that checks a whole Config and reports every problem at once
// (docs/design.md §1), plus the values derived from it ("auto" zeros filled in).
#ifndef CONVEYOR_TRAINER_CONFIG_CONFIG_VALIDATION_H_
#define CONVEYOR_TRAINER_CONFIG_CONFIG_VALIDATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"

namespace conveyor {

// Looks up an environment variable; nullptr when unset (the signature of getenv).
using EnvLookup = std::function<const char*(const char*)>;

// The world size the job runs with: WORLD_SIZE, else SLURM_NTASKS when set by a
// launcher, else nproc_per_node * nnodes. A set but malformed or non-positive
// variable gives 0, which ValidateConfig reports, rather than silently running with
// a different number of ranks.
int WorldSizeFromEnvironment(const Config& config, const EnvLookup& getenv_fn);
int WorldSizeFromEnvironment(const Config& config);  // uses getenv

// Checks the whole config against itself and the world size; returns every problem
// (empty when valid). Each problem is one line that starts with the flag name(s)
// involved and states the fix.
std::vector<std::string> ValidateConfig(const Config& config, int world_size);

// Validates and returns the config with derived values filled in, so the printed
// effective config has no zero "auto" values: ffn_hidden_size, num_query_groups,
// kv_channels, max_position_embeddings, num_micro_batches, global_batch_size,
// lr_decay_iters, lr_warmup_iters (from lr_warmup_fraction, which is then cleared),
// num_virtual_stages_per_pipeline_rank (from num_layers_per_virtual_pipeline_stage,
// which is then cleared), pipeline_schedule, recompute_granularity,
// recompute_modules and tokenizer_type (GPT2BPETokenizer, Megatron's default, when
// --vocab-file and --merge-file are given without it). The result validates again
// and resolves to itself.
// Returns InvalidArgumentError listing every problem (one per line) when invalid.
// The run resolves through ResolvedConfig::Resolve (trainer/config/resolved_config.h), which
// adds the tokenizer's vocabulary, the derived sizes and the choice enums.
absl::StatusOr<Config> ResolveConfig(const Config& config, int world_size);

// Megatron's padded vocab: vocab_size rounded up to a multiple of
// make_vocab_size_divisible_by * tensor_model_parallel_size.
int64_t PaddedVocabSize(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_CONFIG_VALIDATION_H_
