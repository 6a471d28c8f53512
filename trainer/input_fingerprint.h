// Whether the ranks of a job read the same files. Each rank reads its own view of the
// datasets, the tokenizer and the --load-hf weights, at paths that may differ per node
// (node-local copies). A stale copy on one node, or another model's weights, would let
// that node's replicas train on other tokens or weights, without an error, and the
// replicas would diverge for good. So the ranks compare what they read, by contents
// (sizes and CRC32Cs, file_digest.h), not by path, before training; the checkpoint a
// rank loaded is compared on its own (trainer/checkpoint/load_agreement.h).
#ifndef CONVEYOR_TRAINER_INPUT_FINGERPRINT_H_
#define CONVEYOR_TRAINER_INPUT_FINGERPRINT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "parallel/communicator.h"
#include "proto/config.pb.h"

namespace conveyor {

// One file a rank reads.
struct RankInput {
  std::string what;      // the same on every rank: "--data-path dataset 1 of 2 (.bin)"
  std::string path;      // this rank's path to it
  std::string contents;  // a description without the path (file_digest.h)
};

// The files `config` makes this rank read, described (this reads them, sampling the
// large ones): each dataset's .idx and .bin of --data-path and --train/valid/test-data-
// path, --vocab-file, --merge-file, --tokenizer-model (a folder: its tokenizer.json and
// tokenizer_config.json) and the --load-hf weight files. A file that cannot be read is
// described as such; the code that reads it later reports why.
std::vector<RankInput> InputsOf(const Config& config);

// A collective over `world`: OK on every rank when every rank's `mine` holds the same
// inputs with the same contents (paths may differ), else FailedPrecondition on every
// rank naming each differing input, which ranks read which contents at which path, and
// the fix. One gather of a 16-character fingerprint when all agree.
absl::Status AgreeOnInputs(const std::vector<RankInput>& mine, Communicator& world);

// What the world group checks first (ParallelState::Create's check): AgreeOnConfig,
// then, when the settings agree, AgreeOnInputs(InputsOf(config)).
absl::Status AgreeOnConfigAndInputs(const Config& config, Communicator& world);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_INPUT_FINGERPRINT_H_
