// TFRecord framing, the container of TensorBoard's event files: each record is
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// with integers little-endian. The CRC is masked, mask(c) = ((c >> 15) | (c << 17)) +
// 0xa282ead8 (mod 2^32), because a CRC computed over data that itself holds CRCs is
// weak; readers check both sums and stop at a truncated last record, so a file cut
// short by a killed writer stays readable up to its last whole record.
#ifndef CONVEYOR_TRAINER_REPORTING_TENSORBOARD_RECORD_FRAMING_H_
#define CONVEYOR_TRAINER_REPORTING_TENSORBOARD_RECORD_FRAMING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace conveyor::tensorboard {

// mask(crc32c(data)) as defined above.
uint32_t MaskedCrc32c(absl::string_view data);

// `data` framed as one record, ready to append to the file.
std::string FrameRecord(absl::string_view data);

}  // namespace conveyor::tensorboard

#endif  // CONVEYOR_TRAINER_REPORTING_TENSORBOARD_RECORD_FRAMING_H_
