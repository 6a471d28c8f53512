// Reader for Megatron-LM's indexed dataset: a `.bin` of token ids laid end to
// end and an `.idx` (magic "MMIDIDX\0\0", version 1) that says where each
// sequence starts and which sequences form each document. Users bring files
// made by Megatron's tools, so the format is followed to the byte.
#ifndef CONVEYOR_DATA_INDEXED_DATASET_H_
#define CONVEYOR_DATA_INDEXED_DATASET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/mapped_file.h"
#include "data/token_dtype.h"

namespace conveyor {

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
inline constexpr uint64_t kIndexVersion = 1;
// magic, u64 version, u8 dtype, u64 sequence count, u64 document-index count.
inline constexpr int64_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;

// OK unless `prefix` names one of a dataset's files instead of the dataset
// (it ends in .bin or .idx and `prefix`.idx does not exist), or a directory
// with no `prefix`.idx beside it. The error says to pass the prefix (one found
// in the directory, if any), and names `flag` (e.g. "--data-path").
absl::Status CheckDatasetPrefix(const std::string& prefix, absl::string_view flag);

class IndexedDataset {
 public:
  // Opens `path_prefix`.idx and `path_prefix`.bin. Every inconsistency
  // (magic, version, dtype, truncation, a sequence past the end of the .bin, an
  // .idx whose sequences do not lie end to end and fill the .bin exactly,
  // malformed document boundaries) is an InvalidArgument naming the file; a
  // directory in place of either file is a FailedPrecondition saying so.
  static absl::StatusOr<std::unique_ptr<IndexedDataset>> Open(const std::string& path_prefix);

  const std::string& path_prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return int64_t(sequence_lengths_.size()); }
  // Documents; the .idx's count field is one more (it counts the leading 0).
  int64_t num_documents() const { return int64_t(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }

  const std::vector<int32_t>& sequence_lengths() const { return sequence_lengths_; }
  // Byte offsets of each sequence in the .bin.
  const std::vector<int64_t>& sequence_pointers() const { return sequence_pointers_; }
  // document_indices()[d] .. [d+1] are the sequences of document d.
  const std::vector<int64_t>& document_indices() const { return document_indices_; }

  // Tokens [offset, offset + length) of sequence `i`; length < 0 means "to
  // the end", as Megatron's get(i, offset, length=None).
  absl::StatusOr<std::vector<int64_t>> Get(int64_t i, int64_t offset = 0,
                                           int64_t length = -1) const;
  // The same range appended to `out` as int32 (token ids of a vocabulary).
  absl::Status AppendTokens(int64_t i, int64_t offset, int64_t length,
                            std::vector<int32_t>* out) const;

  // The largest token id in the file (-1 with no tokens), read in one pass;
  // nullopt when the file holds more than `max_tokens` (a pass would be slow).
  std::optional<int64_t> LargestTokenId(int64_t max_tokens) const;

 private:
  IndexedDataset() = default;
  // Whether `ds`'s sequences tile its .bin of `bin_size` bytes exactly, as Megatron
  // writes them; sums num_tokens_. InvalidArgument naming both files otherwise.
  static absl::Status CheckIndexTilesBin(IndexedDataset& ds, const std::string& idx_path,
                                         const std::string& bin_path, int64_t bin_size);
  absl::Status CheckRange(int64_t i, int64_t offset, int64_t* length) const;

  std::string prefix_;
  TokenDType dtype_ = TokenDType::kUint16;
  int64_t num_tokens_ = 0;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> sequence_pointers_;
  std::vector<int64_t> document_indices_;
  std::unique_ptr<MappedFile> bin_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_INDEXED_DATASET_H_
