// Whether the ranks of a job were started with one configuration. Each process parses
// its own command line; under an external launcher a rank can be given other flags (a
// stale script on one node, an environment variable expanded differently). Ranks that
// disagree on the model's shape abort inside the transport at their first collective;
// ranks that disagree on --seed, --lr or --micro-batch-size train on silently, wrong.
// So the ranks compare their settings once, over the world group, before any other
// group or collective exists.
#ifndef CONVEYOR_TRAINER_CONFIG_CONFIG_AGREEMENT_H_
#define CONVEYOR_TRAINER_CONFIG_CONFIG_AGREEMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "parallel/communicator.h"
#include "proto/config.pb.h"

namespace conveyor {

// The settings every rank must share, as (flag, value) in declaration order: every
// flag except those that name a rank's own view of a file (--load, --load-hf,
// --data-cache-path, tokenizer files: each node may hold its own copy at its own path,
// and what was read is compared by its contents, input_fingerprint.h) or what only this
// process does (--metrics-file, --trace-file, --cuda-synchronize-each-op, --dry-run).
// Of a dataset list (--data-path, --train/valid/test-data-path) only the number of
// datasets and their weights are settings: "2 datasets, weights [0.3, 0.7]".
std::vector<std::pair<std::string, std::string>> SettingsEveryRankShares(const Config& config);

// 16 hex digits of a 64-bit FNV-1a of `text`: the same in every process (absl::Hash is
// seeded per process), for comparing texts across ranks by one short gather.
std::string TextFingerprint(absl::string_view text);

// A collective over `world`: OK on every rank when all ranks hold the same settings,
// else FailedPrecondition on every rank naming each differing flag and which ranks
// hold which value. One gather of a 16-character fingerprint when all agree.
absl::Status AgreeOnConfig(const Config& config, Communicator& world);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_CONFIG_AGREEMENT_H_
