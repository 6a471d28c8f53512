#include "trainer/reporting/tensorboard/record_framing.h"

#include "trainer/checkpoint/crc32c.h"

namespace conveyor::tensorboard {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = Crc32c(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string FrameRecord(absl::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  AppendLittleEndian(data.size(), 8, &record);
  AppendLittleEndian(MaskedCrc32c(record), 4, &record);  // of the 8 length bytes
  record.append(data.data(), data.size());
  AppendLittleEndian(MaskedCrc32c(data), 4, &record);
  return record;
}

}  // namespace conveyor::tensorboard
