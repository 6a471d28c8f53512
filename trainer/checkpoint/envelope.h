// A protobuf message in a self-checking file, for the manifest and its per-rank
// fragments. Serialised protobuf alone cannot tell a truncated file from a shorter
// message (it may parse cleanly), so the payload is framed:
//
//   bytes 0-7    magic "CVYCKPT1"
//   bytes 8-11   CRC32C of the payload, little-endian
//   bytes 12-15  zero (reserved)
//   bytes 16-23  payload length in bytes, little-endian
//   bytes 24-    payload: the serialised message
#ifndef CONVEYOR_TRAINER_CHECKPOINT_ENVELOPE_H_
#define CONVEYOR_TRAINER_CHECKPOINT_ENVELOPE_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"

namespace conveyor {

inline constexpr char kEnvelopeMagic[] = "CVYCKPT1";
inline constexpr int kEnvelopeHeaderBytes = 24;

std::string SealEnvelope(const google::protobuf::MessageLite& message);

// Parses `bytes`, read from `path` (named in every error): DataLoss when the file is
// not an envelope, is truncated, fails its checksum or does not parse.
absl::Status OpenEnvelope(const std::string& path, const std::string& bytes,
                          google::protobuf::MessageLite* message);

// Seals `message` into `path` durably (written, fsynced, closed).
absl::Status WriteEnvelopeFile(const std::string& path,
                               const google::protobuf::MessageLite& message);
// Reads and opens `path`; NotFound when it does not exist.
absl::Status ReadEnvelopeFile(const std::string& path, google::protobuf::MessageLite* message);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_ENVELOPE_H_
