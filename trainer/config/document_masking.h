// The run's document masking (--eod-mask-loss, --reset-position-ids,
// --reset-attention-mask, model/document_masks.h) and the eod token it looks for.
#ifndef CONVEYOR_TRAINER_CONFIG_DOCUMENT_MASKING_H_
#define CONVEYOR_TRAINER_CONFIG_DOCUMENT_MASKING_H_

#include "absl/status/status.h"
#include "data/tokenizers/tokenizer.h"
#include "model/document_masks.h"
#include "proto/config.pb.h"

namespace conveyor {

// Fixes --eod-token-id to the tokenizer's eod (`tokenizer` null: none, the data was
// tokenized elsewhere) and checks that the masking flags have one: Megatron takes the
// eod from its tokenizer, so a different --eod-token-id is refused, and without a
// tokenizer the flags need --eod-token-id. Errors name the flag and the fix.
absl::Status ResolveEodToken(const Tokenizer* tokenizer, Config* config);

// What a resolved config asks for.
DocumentMasking DocumentMaskingOf(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_DOCUMENT_MASKING_H_
