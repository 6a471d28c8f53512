// CRC32C (Castagnoli): the checksum of every shard record and manifest.
//
// Chosen over FNV-1a because x86-64-v2 (our -march) has an instruction for it that
// checksums several GB/s, far above disk bandwidth, and because it is the checksum of
// ext4, iSCSI and LevelDB, so tools to recompute it exist everywhere (Python:
// `crc32c` package; `google-crc32c`).
#ifndef CONVEYOR_TRAINER_CHECKPOINT_CRC32C_H_
#define CONVEYOR_TRAINER_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace conveyor {

// CRC32C of data[0, n) continuing from `crc` (the CRC of the bytes before it), so
// Crc32c(b, Crc32c(a)) == Crc32c(a + b). Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// The same function computed a byte at a time from a table, without the CPU
// instruction: what Crc32c uses where SSE4.2 is missing, and its reference in tests.
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_CRC32C_H_
