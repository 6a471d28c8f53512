#include "trainer/file_digest.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "data/indexed_dataset.h"
#include "data/mapped_file.h"
#include "trainer/checkpoint/crc32c.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {
namespace {

// The CRC32C of kDigestBlocks blocks spread evenly over `file` (its size is above one
// block per sample), continuing `crc`.
uint32_t SampledCrc(const MappedFile& file, uint32_t crc) {
  const int64_t size = int64_t(file.size());
  for (int i = 0; i < kDigestBlocks; ++i) {
    const int64_t offset = (size - kDigestBlockBytes) * i / (kDigestBlocks - 1);
    crc = Crc32c(file.data() + offset, size_t(kDigestBlockBytes), crc);
  }
  return crc;
}

bool HashedWhole(const MappedFile& file, int64_t whole_up_to) {
  return int64_t(file.size()) <= std::max(whole_up_to, kDigestBlocks * kDigestBlockBytes);
}

std::string Described(const MappedFile& file, uint32_t crc, absl::string_view sampled_what) {
  return absl::StrFormat("%d bytes, CRC32C %08x%s", file.size(), crc,
                         sampled_what.empty() ? "" : absl::StrCat(" of ", sampled_what));
}

constexpr char kSampled[] = "256 sampled 4 KiB blocks";

std::string DescribeMapped(const MappedFile& file, int64_t whole_up_to) {
  if (HashedWhole(file, whole_up_to)) return Described(file, Crc32c(file.data(), file.size()), "");
  return Described(file, SampledCrc(file, 0), kSampled);
}

}  // namespace

absl::StatusOr<std::string> DescribeFileContents(const std::string& path, int64_t whole_up_to) {
  ASSIGN_OR_RETURN(const std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  return DescribeMapped(*file, whole_up_to);
}

absl::StatusOr<std::string> DescribeDatasetIndex(const std::string& path) {
  ASSIGN_OR_RETURN(const std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  const std::string contents = DescribeMapped(*file, kWholeFileDigestBytes);
  if (int64_t(file->size()) < kIndexHeaderBytes ||
      std::memcmp(file->data(), kIndexMagic, sizeof(kIndexMagic)) != 0) {
    return absl::StrCat("no Megatron index header, ", contents);
  }
  uint64_t sequences = 0, document_indices = 0;
  std::memcpy(&sequences, file->data() + 18, sizeof(sequences));
  std::memcpy(&document_indices, file->data() + 26, sizeof(document_indices));
  // The count field includes the leading 0 (IndexedDataset::num_documents).
  return absl::StrFormat("%d sequences in %d documents, %s", sequences,
                         document_indices > 0 ? document_indices - 1 : 0, contents);
}

absl::StatusOr<std::string> DescribeSafetensorsFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  if (HashedWhole(*file, kWholeFileDigestBytes))
    return DescribeMapped(*file, kWholeFileDigestBytes);
  uint32_t crc = SampledCrc(*file, 0);
  const absl::StatusOr<SafetensorsFile> parsed = SafetensorsFile::Open(path);
  if (!parsed.ok()) return Described(*file, crc, kSampled);
  // The header: its length prefix and JSON end where the first tensor's data begins.
  int64_t data_start = int64_t(file->size());
  for (const auto& [name, entry] : parsed->entries()) {
    data_start = std::min(data_start, entry.begin);
  }
  crc = Crc32c(file->data(), size_t(data_start), crc);
  constexpr int64_t kEnd = 256;
  for (const auto& [name, entry] : parsed->entries()) {
    const int64_t head = std::min(kEnd, entry.end - entry.begin);
    crc = Crc32c(file->data() + entry.begin, size_t(head), crc);
    const int64_t tail_start = std::max(entry.begin + head, entry.end - kEnd);
    crc = Crc32c(file->data() + tail_start, size_t(entry.end - tail_start), crc);
  }
  return Described(
      *file, crc,
      absl::StrCat("the header, each tensor's first and last ", kEnd, " bytes and ", kSampled));
}

std::string DescribeUnreadable(const absl::Status& status) {
  return absl::StrCat("cannot be read (", absl::StatusCodeToString(status.code()), ")");
}

}  // namespace conveyor
