#include "data/dataset_builder.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/blended_dataset.h"
#include "data/blending_indices.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/split.h"

namespace conveyor {
namespace {

constexpr std::array<const char*, 3> kPerSplitFlags = {"--train-data-path", "--valid-data-path",
                                                       "--test-data-path"};

// Samples to request from one GPT dataset per split: nullopt builds nothing;
// kOneEpoch builds exactly one epoch (Megatron's size None).
using SplitSizes = std::array<std::optional<int64_t>, 3>;
constexpr int64_t kOneEpoch = -1;
using GptSplits = std::array<std::unique_ptr<GptDataset>, 3>;

// An error building split `split`'s indices, in `context`; indices too large
// for memory also get the flags that size the split and the fix.
absl::Status SplitError(const absl::Status& st, absl::string_view context, int split,
                        const DatasetBuildConfig& config) {
  if (st.code() != absl::StatusCode::kResourceExhausted) return StatusBuilder(st) << context;
  return StatusBuilder(absl::ResourceExhaustedError(
             absl::StrCat(st.message(), "; the ", kSplitNames[split], " split's sample count is ",
                          config.sample_count_flags[split],
                          ": lower it, or run where this process may use more memory")))
         << context;
}

// Megatron's _build_megatron_dataset_splits for one prefix: split k holds the
// sequences [round(begin_k * n), round(end_k * n)) of the dataset.
absl::StatusOr<GptSplits> BuildGptSplits(const std::string& prefix, absl::string_view flag,
                                         const SplitMatrix& matrix, const std::string& split_text,
                                         const SplitSizes& sizes,
                                         const DatasetBuildConfig& config) {
  RETURN_IF_ERROR(CheckDatasetPrefix(prefix, flag));
  ASSIGN_OR_RETURN(std::shared_ptr<const IndexedDataset> dataset, IndexedDataset::Open(prefix),
                   _ << flag);
  const int64_t n = dataset->num_sequences();
  bool any_wanted = false;
  for (int i = 0; i < 3; ++i) any_wanted |= matrix[i] && sizes[i];
  if (any_wanted && (n == 0 || dataset->num_tokens() == 0)) {
    // Said before any split arithmetic: no share of nothing would help.
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", prefix, ": the dataset is empty (", prefix, ".idx lists ",
        dataset->num_documents(), " documents, ", n, " sequences, ", dataset->num_tokens(),
        " tokens): there is nothing to train on; check that preprocessing read its input, or "
        "leave this prefix out of ",
        flag));
  }
  const auto ranges = SplitRanges(matrix, n);
  GptSplits out;
  for (int i = 0; i < 3; ++i) {
    if (!matrix[i] || !sizes[i]) continue;
    const auto [begin, end] = *ranges[i];
    if (begin >= end) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", prefix, ": ",
          split_text.empty() ? "the dataset" : absl::StrCat("--split ", split_text), " gives the ",
          kSplitNames[i], " split no sequences (the dataset has ", n,
          "); give that split a larger share", i == 0 ? "" : " or set --eval-iters 0"));
    }
    std::vector<int32_t> documents(end - begin);
    std::iota(documents.begin(), documents.end(), int32_t(begin));
    GptIndexKey key;
    key.dataset_path = prefix;
    key.index_split = kSplitNames[i];
    key.split = split_text;
    key.split_range = matrix[i];
    key.num_sequences = n;
    key.num_tokens = dataset->num_tokens();
    key.config.sequence_length = config.sequence_length;
    key.config.random_seed = config.random_seed;
    key.config.num_samples = *sizes[i];
    // Megatron drops the ragged last sample on train, and by default
    // (drop_last_partial_validation_sequence) on the other splits too.
    key.config.drop_last_partial_sequence = true;
    absl::StatusOr<GptIndices> indices =
        BuildOrLoadGptIndices(dataset->sequence_lengths(), documents, key, config.cache);
    if (!indices.ok()) {
      return SplitError(indices.status(),
                        absl::StrCat(flag, " ", prefix, " (", kSplitNames[i], " split)"), i,
                        config);
    }
    out[i] = GptDataset::FromIndices(dataset, key.config, *std::move(indices),
                                     {config.token_ids, absl::StrCat(flag, " ", prefix)});
  }
  return out;
}

// The splits in `matrix` that are asked for samples, from one blend.
// `single_prefix_as_is`: one prefix gives its GPT dataset directly even when
// weighted (Megatron does so for per-split paths, not for --data-path).
absl::StatusOr<SplitSources> BuildFromBlend(const Blend& blend, absl::string_view flag,
                                            const SplitMatrix& matrix,
                                            const std::string& split_text,
                                            const std::array<int64_t, 3>& sizes,
                                            bool single_prefix_as_is,
                                            const DatasetBuildConfig& config) {
  SplitSources out;
  auto wanted = [&](int i) { return matrix[i].has_value() && sizes[i] > 0; };
  if (blend.prefixes.size() == 1 && (!blend.weighted() || single_prefix_as_is)) {
    SplitSizes s;
    for (int i = 0; i < 3; ++i) {
      if (wanted(i)) s[i] = sizes[i];
    }
    ASSIGN_OR_RETURN(GptSplits gpt,
                     BuildGptSplits(blend.prefixes[0], flag, matrix, split_text, s, config));
    for (int i = 0; i < 3; ++i) out[i] = std::move(gpt[i]);
    return out;
  }

  const size_t k = blend.prefixes.size();
  // Weighted: each dataset is asked for its share plus the surplus, and the
  // blend is as long as the shares without surplus added up. Unweighted: one
  // epoch of each, blended by size.
  std::vector<double> weights;
  std::array<std::vector<int64_t>, 3> targets, buffers;
  if (blend.weighted()) {
    weights = NormalizeWeights(blend.weights);
    for (int i = 0; i < 3; ++i) {
      targets[i] = SamplesPerDataset(weights, sizes[i], 0.0);
      buffers[i] = SamplesPerDataset(weights, sizes[i], kMidLevelDatasetSurplus);
    }
  }
  std::array<std::vector<std::unique_ptr<SampleSource>>, 3> parts;
  for (size_t d = 0; d < k; ++d) {
    SplitSizes s;
    for (int i = 0; i < 3; ++i) {
      if (wanted(i)) s[i] = blend.weighted() ? buffers[i][d] : kOneEpoch;
    }
    ASSIGN_OR_RETURN(GptSplits gpt,
                     BuildGptSplits(blend.prefixes[d], flag, matrix, split_text, s, config));
    for (int i = 0; i < 3; ++i) parts[i].push_back(std::move(gpt[i]));
  }
  for (int i = 0; i < 3; ++i) {
    if (!wanted(i)) continue;
    std::vector<double> w = weights;
    int64_t size = 0;
    if (blend.weighted()) {
      for (int64_t t : targets[i]) size += t;
    } else {
      for (const auto& p : parts[i]) {
        w.push_back(double(p->size()));
        size += p->size();
      }
      size = std::min(size, sizes[i]);
    }
    absl::StatusOr<std::unique_ptr<BlendedDataset>> blended =
        BlendedDataset::Create(std::move(parts[i]), w, size);
    if (!blended.ok()) {
      return SplitError(blended.status(), absl::StrCat(flag, " (", kSplitNames[i], " split)"), i,
                        config);
    }
    out[i] = *std::move(blended);
  }
  return out;
}

}  // namespace

SampleCountFlags TrainerSampleCountFlags() {
  return {"--train-iters * --global-batch-size (or --train-samples)",
          "(--train-iters / --eval-interval + 1) * --eval-iters * --global-batch-size",
          "--eval-iters * --global-batch-size"};
}

absl::StatusOr<SplitSources> BuildSplitDatasets(const DatasetBuildConfig& config,
                                                const std::array<int64_t, 3>& sizes) {
  const bool per_split =
      config.blend_per_split[0] || config.blend_per_split[1] || config.blend_per_split[2];
  if (config.blend && per_split) {
    return absl::InvalidArgumentError(
        "--data-path and --train-data-path/--valid-data-path/--test-data-path are exclusive");
  }
  if (!config.blend && !per_split) {
    return absl::InvalidArgumentError(
        "no data: pass --data-path, --train-data-path or --mock-data");
  }
  for (int i = 0; i < 3; ++i) {
    if (sizes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", kSplitNames[i], " split was asked for ", sizes[i], " samples"));
    }
  }
  if (config.blend) {
    ASSIGN_OR_RETURN(SplitMatrix matrix, ParseSplit(config.split));
    return BuildFromBlend(*config.blend, "--data-path", matrix, config.split, sizes,
                          /*single_prefix_as_is=*/false, config);
  }
  // Each split from its own blend, which it uses whole.
  SplitSources out;
  for (int i = 0; i < 3; ++i) {
    if (!config.blend_per_split[i] || sizes[i] == 0) continue;
    SplitMatrix whole;
    whole[i] = std::make_pair(0.0, 1.0);
    std::array<int64_t, 3> only = {0, 0, 0};
    only[i] = sizes[i];
    ASSIGN_OR_RETURN(SplitSources built,
                     BuildFromBlend(*config.blend_per_split[i], kPerSplitFlags[i], whole, "", only,
                                    /*single_prefix_as_is=*/true, config));
    out[i] = std::move(built[i]);
  }
  return out;
}

}  // namespace conveyor
