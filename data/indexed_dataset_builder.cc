#include "data/indexed_dataset_builder.h"

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/indexed_dataset.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> IndexedDatasetBuilder::Create(
    const std::string& bin_path, TokenDType dtype) {
  std::FILE* f = std::fopen(bin_path.c_str(), "wb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", bin_path));
  }
  return std::unique_ptr<IndexedDatasetBuilder>(new IndexedDatasetBuilder(bin_path, f, dtype));
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (bin_ != nullptr) std::fclose(bin_);
}

template <typename T>
absl::Status IndexedDatasetBuilder::WriteTokens(absl::Span<const T> tokens) {
  if (bin_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(bin_path_, ": builder already finalized"));
  }
  const int item = TokenDTypeSize(dtype_);
  buffer_.resize(tokens.size() * item);
  for (size_t i = 0; i < tokens.size(); ++i) {
    StoreToken(dtype_, int64_t(tokens[i]), buffer_.data(), int64_t(i));
  }
  if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), bin_) != buffer_.size()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("write to ", bin_path_, " failed"));
  }
  num_tokens_ += int64_t(tokens.size());
  return absl::OkStatus();
}

template <typename T>
absl::Status IndexedDatasetBuilder::AddDocumentImpl(absl::Span<const T> tokens,
                                                    absl::Span<const int32_t> lengths) {
  int64_t total = 0;
  for (int32_t len : lengths) {
    if (len < 0) return absl::InvalidArgumentError("negative sequence length");
    total += len;
  }
  if (total != int64_t(tokens.size())) {
    return absl::InvalidArgumentError(absl::StrCat(bin_path_, ": document of ", tokens.size(),
                                                   " tokens but sequence lengths sum to ", total));
  }
  RETURN_IF_ERROR(WriteTokens(tokens));
  sequence_lengths_.insert(sequence_lengths_.end(), lengths.begin(), lengths.end());
  EndDocument();
  return absl::OkStatus();
}

absl::Status IndexedDatasetBuilder::AddDocument(absl::Span<const int64_t> tokens,
                                                absl::Span<const int32_t> lengths) {
  return AddDocumentImpl(tokens, lengths);
}

absl::Status IndexedDatasetBuilder::AddDocument(absl::Span<const int32_t> tokens,
                                                absl::Span<const int32_t> lengths) {
  return AddDocumentImpl(tokens, lengths);
}

absl::Status IndexedDatasetBuilder::AddItem(absl::Span<const int64_t> tokens) {
  RETURN_IF_ERROR(WriteTokens(tokens));
  sequence_lengths_.push_back(int32_t(tokens.size()));
  return absl::OkStatus();
}

absl::Status IndexedDatasetBuilder::AddItem(absl::Span<const int32_t> tokens) {
  RETURN_IF_ERROR(WriteTokens(tokens));
  sequence_lengths_.push_back(int32_t(tokens.size()));
  return absl::OkStatus();
}

void IndexedDatasetBuilder::EndDocument() {
  document_indices_.push_back(int64_t(sequence_lengths_.size()));
}

absl::Status IndexedDatasetBuilder::Finalize(const std::string& idx_path) {
  if (bin_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(bin_path_, ": builder already finalized"));
  }
  const bool bin_ok = std::fclose(bin_) == 0;
  bin_ = nullptr;
  if (!bin_ok) {
    return absl::ErrnoToStatus(errno, absl::StrCat("closing ", bin_path_, " failed"));
  }

  const uint64_t n = sequence_lengths_.size();
  const uint64_t d = document_indices_.size();
  std::string out;
  out.reserve(kIndexHeaderBytes + 12 * n + 8 * d);
  auto put = [&out](const void* p, size_t bytes) {
    out.append(static_cast<const char*>(p), bytes);
  };
  put(kIndexMagic, sizeof(kIndexMagic));
  put(&kIndexVersion, 8);
  const uint8_t code = static_cast<uint8_t>(dtype_);
  put(&code, 1);
  put(&n, 8);
  put(&d, 8);
  put(sequence_lengths_.data(), 4 * n);
  // Pointers are byte offsets: the running sum of earlier sequences' sizes.
  const int64_t item = TokenDTypeSize(dtype_);
  int64_t pointer = 0;
  for (int32_t len : sequence_lengths_) {
    put(&pointer, 8);
    pointer += int64_t(len) * item;
  }
  put(document_indices_.data(), 8 * d);

  std::FILE* f = std::fopen(idx_path.c_str(), "wb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", idx_path));
  }
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok) {
    // A failed write, not a damaged input (base/exit_code.h): exit 1.
    return absl::UnavailableError(absl::StrCat("write to ", idx_path, " failed"));
  }
  return absl::OkStatus();
}

}  // namespace conveyor
