// Document masking of packed samples, as Megatron's
// megatron/core/datasets/gpt_dataset.py _get_ltor_masks_and_position_ids defines it
// (--eod-mask-loss, --reset-position-ids, --reset-attention-mask). A sample's
// documents end at each eod token, which belongs to the document it ends: for input
// token j of a sample, with e the last eod at an index below j (none: e = -1),
//   document_start[j] = e + 1,   position_ids[j] = j - document_start[j],
//   loss_mask[j] = 0 if token j is eod, else 1.
// (Megatron's loop subtracts i + 1 - prev from the positions after each eod i, which
// is the same restart at 0; its attention mask removes keys <= i for queries > i,
// i.e. keys before document_start.)
#ifndef CONVEYOR_MODEL_DOCUMENT_MASKS_H_
#define CONVEYOR_MODEL_DOCUMENT_MASKS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "model/micro_batch.h"

namespace conveyor {

// Which masks a run asks for, and the token that ends a document.
struct DocumentMasking {
  int32_t eod = -1;
  bool eod_mask_loss = false;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;

  bool any() const { return eod_mask_loss || reset_position_ids || reset_attention_mask; }
};

// The masks of `batch` samples of `seq` input tokens each (`tokens`, row-major); each
// vector is filled only when its flag is on.
DocumentMasks MakeDocumentMasks(absl::Span<const int32_t> tokens, int64_t batch, int64_t seq,
                                const DocumentMasking& masking);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_DOCUMENT_MASKS_H_
