// The token ids a model has embedding rows for, and the check that keeps every
// other id out of training: an id at or above the vocabulary would index past
// the embedding (silently, and differently under each tensor-parallel layout),
// so each sample is checked as it is read, before it reaches a micro-batch.
// The check is one compare per token, nothing next to the model's work, and
// needs no pass over the whole corpus at startup.
#ifndef CONVEYOR_DATA_TOKEN_ID_LIMIT_H_
#define CONVEYOR_DATA_TOKEN_ID_LIMIT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace conveyor {

struct TokenIdLimit {
  // Ids must lie in [0, vocab_size): the vocabulary before padding. 0 checks
  // nothing.
  int64_t vocab_size = 0;
  // Where the vocabulary came from, for the fix the error suggests: the
  // --tokenizer-type, or "" when --vocab-size alone sets it.
  std::string tokenizer_type;

  bool enabled() const { return vocab_size > 0; }
};

// The position of the first id in `tokens` outside [0, limit.vocab_size), or
// nullopt when all are inside (or the limit is disabled).
std::optional<size_t> FirstTokenIdOutside(absl::Span<const int32_t> tokens,
                                          const TokenIdLimit& limit);

// InvalidArgument for data holding `id` (outside the limit): names `source`
// (the flag and dataset prefix), where the id was found (`where`, e.g.
// "document 3"), the vocabulary and the fix. `largest_id` is the largest id
// in the data, exact when `largest_is_exact`, else a lower bound (the largest
// seen near `id`).
absl::Status TokenIdOutsideVocabularyError(const TokenIdLimit& limit, absl::string_view source,
                                           absl::string_view where, int64_t id, int64_t largest_id,
                                           bool largest_is_exact);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKEN_ID_LIMIT_H_
