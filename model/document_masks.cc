#include "model/document_masks.h"

namespace conveyor {

DocumentMasks MakeDocumentMasks(absl::Span<const int32_t> tokens, int64_t batch, int64_t seq,
                                const DocumentMasking& masking) {
  DocumentMasks masks;
  const int64_t n = batch * seq;
  if (masking.eod_mask_loss) masks.loss_mask.resize(n);
  if (masking.reset_position_ids) masks.position_ids.resize(n);
  if (masking.reset_attention_mask) masks.document_start.resize(n);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t start = 0;  // of the current document, within the sample
    for (int64_t j = 0; j < seq; ++j) {
      const int64_t t = b * seq + j;
      const bool eod = tokens[t] == masking.eod;
      if (masking.eod_mask_loss) masks.loss_mask[t] = eod ? 0.0f : 1.0f;
      if (masking.reset_position_ids) masks.position_ids[t] = static_cast<int32_t>(j - start);
      if (masking.reset_attention_mask) masks.document_start[t] = static_cast<int32_t>(start);
      // The eod ends its own document: the next token starts a new one.
      if (eod) start = j + 1;
    }
  }
  return masks;
}

}  // namespace conveyor
