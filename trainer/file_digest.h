// Cheap descriptions of the contents of the files a rank reads, for comparing them
// across ranks (input_fingerprint.h): a file's size and a CRC32C of its bytes, or, for
// a large file, of blocks sampled evenly through it, so that no dataset or weight file
// is read a second time. Each description holds no path: ranks that read the same
// bytes at different paths (a node-local copy) describe them alike.
#ifndef CONVEYOR_TRAINER_FILE_DIGEST_H_
#define CONVEYOR_TRAINER_FILE_DIGEST_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace conveyor {

// Files up to this size are hashed whole.
inline constexpr int64_t kWholeFileDigestBytes = 64 << 20;
// Larger files: this many blocks of kDigestBlockBytes, evenly spaced, the first at the
// start and the last at the end (1 MiB read in all).
inline constexpr int kDigestBlocks = 256;
inline constexpr int64_t kDigestBlockBytes = 4096;

// "27540 bytes, CRC32C 1a2b3c4d", or "... CRC32C of 256 sampled 4 KiB blocks 1a2b3c4d"
// above `whole_up_to` bytes. Errors name the file (NotFound when it does not exist).
absl::StatusOr<std::string> DescribeFileContents(const std::string& path,
                                                 int64_t whole_up_to = kWholeFileDigestBytes);

// A Megatron .idx: its sequence and document counts (from the header, when it has one)
// and DescribeFileContents' description.
absl::StatusOr<std::string> DescribeDatasetIndex(const std::string& path);

// A safetensors file: DescribeFileContents' description, with the header and the first
// and last 256 bytes of every tensor in the CRC, so that two weight files that differ
// in one small tensor (a norm, a bias) differ here too. A file whose header cannot be
// parsed is described by its sampled bytes alone (loading it reports the fault).
absl::StatusOr<std::string> DescribeSafetensorsFile(const std::string& path);

// Why a file could not be described, without its path: "cannot be read (NOT_FOUND)".
// Ranks that miss the same file describe it alike.
std::string DescribeUnreadable(const absl::Status& status);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_FILE_DIGEST_H_
