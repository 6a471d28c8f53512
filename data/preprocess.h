// Preprocessing: JSON-lines text in, Megatron indexed datasets out (one per
// JSON key), tokenized by several worker threads. The library half of the
// `preprocess` binary, so that tests can drive it directly.
#ifndef CONVEYOR_DATA_PREPROCESS_H_
#define CONVEYOR_DATA_PREPROCESS_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/token_dtype.h"
#include "data/tokenizers/tokenizer.h"

namespace conveyor {

struct PreprocessOptions {
  std::string input;  // JSON-lines file, one document object per line
  // Outputs are <output_prefix>_<key>_document.{bin,idx}, Megatron's names.
  std::string output_prefix;
  // A field may be a string (one sequence) or, as in Megatron, a list of
  // strings: the document's sentences, one sequence each.
  std::vector<std::string> json_keys = {"text"};
  bool append_eod = false;
  int workers = 1;
  // A bad line (not UTF-8, bad JSON, a key missing or of the wrong type, text
  // the tokenizer refuses) is fatal by default; with this set it is reported
  // and skipped.
  bool skip_bad_lines = false;
  // Documents between progress lines on `log`, as Megatron's --log-interval;
  // <= 0 prints none.
  int64_t log_interval = 1000;
  std::FILE* log = stderr;
};

struct PreprocessSummary {
  int64_t documents = 0;
  int64_t lines = 0;  // read, blank ones included
  int64_t skipped_lines = 0;
  int64_t tokens = 0;  // over all keys
  int64_t input_bytes = 0;
  double seconds = 0;
  TokenDType dtype = TokenDType::kUint16;
  std::vector<std::string> output_prefixes;  // per key, without .bin/.idx
};

// Writes the datasets, or fails and leaves none of their files behind (so
// that no half-written dataset can be mistaken for data). Writing no document
// at all (an empty input, or every line bad), or no token under some key
// (every text empty), is a failure.
absl::StatusOr<PreprocessSummary> Preprocess(const PreprocessOptions& options,
                                             const Tokenizer& tokenizer);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_PREPROCESS_H_
