// Writer for Megatron's indexed dataset (.bin/.idx). Files it writes are byte
// for byte what Megatron's IndexedDatasetBuilder writes for the same calls, so
// either tool can read what the other made.
#ifndef CONVEYOR_DATA_INDEXED_DATASET_BUILDER_H_
#define CONVEYOR_DATA_INDEXED_DATASET_BUILDER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/token_dtype.h"

namespace conveyor {

class IndexedDatasetBuilder {
 public:
  // Creates (truncates) `bin_path`; tokens stream there as they are added.
  static absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> Create(const std::string& bin_path,
                                                                       TokenDType dtype);
  ~IndexedDatasetBuilder();

  // One document of sequences whose lengths are `lengths` (their sum must be
  // tokens.size()). Tokens are converted to the dtype as numpy's astype does.
  absl::Status AddDocument(absl::Span<const int64_t> tokens, absl::Span<const int32_t> lengths);
  absl::Status AddDocument(absl::Span<const int32_t> tokens, absl::Span<const int32_t> lengths);
  // One sequence of the current document; EndDocument closes the document.
  absl::Status AddItem(absl::Span<const int64_t> tokens);
  absl::Status AddItem(absl::Span<const int32_t> tokens);
  void EndDocument();

  // Closes the .bin and writes the .idx to `idx_path`.
  absl::Status Finalize(const std::string& idx_path);

  int64_t num_sequences() const { return int64_t(sequence_lengths_.size()); }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  IndexedDatasetBuilder(std::string bin_path, std::FILE* bin, TokenDType dtype)
      : bin_path_(std::move(bin_path)), bin_(bin), dtype_(dtype) {}
  template <typename T>
  absl::Status WriteTokens(absl::Span<const T> tokens);
  template <typename T>
  absl::Status AddDocumentImpl(absl::Span<const T> tokens, absl::Span<const int32_t> lengths);

  std::string bin_path_;
  std::FILE* bin_;
  TokenDType dtype_;
  int64_t num_tokens_ = 0;
  std::vector<char> buffer_;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_ = {0};
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_INDEXED_DATASET_BUILDER_H_
