#include "trainer/checkpoint/envelope.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/crc32c.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint format is little-endian and written with memcpy");

constexpr size_t kMagicBytes = 8;

}  // namespace

std::string SealEnvelope(const google::protobuf::MessageLite& message) {
  const std::string payload = message.SerializeAsString();
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  const uint32_t reserved = 0;
  const uint64_t length = payload.size();
  std::string out(kEnvelopeHeaderBytes, '\0');
  std::memcpy(&out[0], kEnvelopeMagic, kMagicBytes);
  std::memcpy(&out[8], &crc, 4);
  std::memcpy(&out[12], &reserved, 4);
  std::memcpy(&out[16], &length, 8);
  return out + payload;
}

absl::Status OpenEnvelope(const std::string& path, const std::string& bytes,
                          google::protobuf::MessageLite* message) {
  if (bytes.size() < kEnvelopeHeaderBytes ||
      std::memcmp(bytes.data(), kEnvelopeMagic, kMagicBytes) != 0) {
    if (bytes.size() < kEnvelopeHeaderBytes &&
        std::memcmp(bytes.data(), kEnvelopeMagic, std::min(bytes.size(), kMagicBytes)) == 0) {
      return absl::DataLossError(absl::StrCat(path, " is truncated: ", bytes.size(),
                                              " bytes, shorter than its ", kEnvelopeHeaderBytes,
                                              "-byte header"));
    }
    return absl::DataLossError(absl::StrCat(path, " is not a Conveyor checkpoint file (no \"",
                                            kEnvelopeMagic, "\" header)"));
  }
  uint32_t crc;
  uint64_t length;
  std::memcpy(&crc, &bytes[8], 4);
  std::memcpy(&length, &bytes[16], 8);
  const uint64_t found = bytes.size() - kEnvelopeHeaderBytes;
  if (found != length) {
    return absl::DataLossError(absl::StrCat(path, " is ", found < length ? "truncated" : "too long",
                                            ": its header promises ", length,
                                            " payload bytes, the file holds ", found));
  }
  const char* payload = bytes.data() + kEnvelopeHeaderBytes;
  const uint32_t actual = Crc32c(payload, length);
  if (actual != crc) {
    return absl::DataLossError(
        absl::StrFormat("%s is corrupt: crc32c of its payload is 0x%08x, the header expects 0x%08x",
                        path, actual, crc));
  }
  if (length > static_cast<uint64_t>(INT_MAX) ||
      !message->ParseFromArray(payload, static_cast<int>(length))) {
    return absl::DataLossError(
        absl::StrCat(path, " has a valid checksum but does not parse as ", message->GetTypeName()));
  }
  return absl::OkStatus();
}

absl::Status WriteEnvelopeFile(const std::string& path,
                               const google::protobuf::MessageLite& message) {
  return WriteFileDurably(path, SealEnvelope(message));
}

absl::Status ReadEnvelopeFile(const std::string& path, google::protobuf::MessageLite* message) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadSmallFile(path));
  return OpenEnvelope(path, bytes, message);
}

}  // namespace conveyor
