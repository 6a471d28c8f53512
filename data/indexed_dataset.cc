#include "data/indexed_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

template <typename T>
T ReadLE(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // x86-64 is little-endian, as the format
  return v;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The dataset prefixes in `dir` (its .idx files without the extension), sorted.
std::vector<std::string> PrefixesIn(const std::string& dir) {
  std::vector<std::string> prefixes;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string path = entry.path().string();
    if (absl::EndsWith(path, ".idx")) prefixes.push_back(path.substr(0, path.size() - 4));
  }
  std::sort(prefixes.begin(), prefixes.end());
  return prefixes;
}

// Maps one of a dataset's two files; a directory in its place also gets what
// a prefix names.
absl::StatusOr<std::unique_ptr<MappedFile>> OpenDatasetFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (file.status().code() != absl::StatusCode::kFailedPrecondition) return file;
  return absl::FailedPreconditionError(
      absl::StrCat(file.status().message(),
                   ": a dataset is the prefix of a .bin/.idx pair of files, PREFIX.bin and "
                   "PREFIX.idx"));
}

}  // namespace

absl::Status CheckDatasetPrefix(const std::string& prefix, absl::string_view flag) {
  std::error_code error;
  if (std::filesystem::is_directory(prefix, error) && !Exists(prefix + ".idx")) {
    const std::vector<std::string> found = PrefixesIn(prefix);
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", prefix, " is a directory: ", flag,
        " takes a dataset's prefix, the path of its .bin/.idx pair without the extension",
        found.empty() ? absl::StrCat(", and ", prefix, " holds no .idx file")
                      : absl::StrCat(", e.g. ", flag, " ", found[0], " (", prefix, " holds ",
                                     found.size(), " dataset", found.size() == 1 ? "" : "s", ")")));
  }
  for (absl::string_view suffix : {".bin", ".idx"}) {
    if (!absl::EndsWith(prefix, suffix) || Exists(prefix + ".idx")) continue;
    const std::string stripped = prefix.substr(0, prefix.size() - suffix.size());
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", prefix, ": ", flag,
        " takes a dataset's prefix, without .bin or .idx (the files are PREFIX.bin and "
        "PREFIX.idx): pass ",
        flag, " ", stripped,
        Exists(stripped + ".idx") ? ""
                                  : absl::StrCat(" (though ", stripped,
                                                 ".idx does not exist "
                                                 "either)")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(
    const std::string& path_prefix) {
  const std::string idx_path = path_prefix + ".idx";
  const std::string bin_path = path_prefix + ".bin";
  auto bad = [&](const std::string& path, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };

  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> idx, OpenDatasetFile(idx_path));
  const char* p = idx->data();
  const int64_t idx_size = int64_t(idx->size());
  if (idx_size < kIndexHeaderBytes) {
    return bad(idx_path,
               absl::StrCat("truncated header: ", idx_size,
                            " bytes, a Megatron index needs at least ", kIndexHeaderBytes));
  }
  if (std::memcmp(p, kIndexMagic, sizeof(kIndexMagic)) != 0) {
    return bad(idx_path, "bad magic: not a Megatron MMIDIDX index");
  }
  const uint64_t version = ReadLE<uint64_t>(p + 9);
  if (version != kIndexVersion) {
    return bad(idx_path,
               absl::StrCat("unsupported index version ", version, " (only version 1 exists)"));
  }
  const uint8_t code = static_cast<uint8_t>(p[17]);
  std::optional<TokenDType> dtype = TokenDTypeFromCode(code);
  if (!dtype) {
    return bad(idx_path,
               absl::StrCat("unknown dtype code ", int(code), " (Megatron defines 1..8)"));
  }
  const uint64_t n = ReadLE<uint64_t>(p + 18);
  const uint64_t d = ReadLE<uint64_t>(p + 26);
  // Bound the counts by the file size before multiplying, so that a corrupt
  // header cannot overflow the size computation.
  const uint64_t body = uint64_t(idx_size - kIndexHeaderBytes);
  if (n > body / 12 || d > body / 8 || 12 * n + 8 * d > body) {
    return bad(idx_path, absl::StrCat("truncated: ", idx_size, " bytes, but the header promises ",
                                      n, " sequences and ", d, " document indices (needs ",
                                      kIndexHeaderBytes, " + 12*", n, " + 8*", d, " bytes)"));
  }
  const int64_t expected = kIndexHeaderBytes + 12 * int64_t(n) + 8 * int64_t(d);
  if (idx_size != expected) {
    return bad(idx_path, absl::StrCat("size mismatch: ", idx_size, " bytes, the header implies ",
                                      expected, " (multimodal sequence modes are not supported)"));
  }
  if (d < 1) return bad(idx_path, "document index count is 0 (must start with 0)");

  auto ds = std::unique_ptr<IndexedDataset>(new IndexedDataset());
  ds->prefix_ = path_prefix;
  ds->dtype_ = *dtype;
  const char* q = p + kIndexHeaderBytes;
  ds->sequence_lengths_.resize(n);
  std::memcpy(ds->sequence_lengths_.data(), q, 4 * n);
  q += 4 * n;
  ds->sequence_pointers_.resize(n);
  std::memcpy(ds->sequence_pointers_.data(), q, 8 * n);
  q += 8 * n;
  ds->document_indices_.resize(d);
  std::memcpy(ds->document_indices_.data(), q, 8 * d);

  if (ds->document_indices_[0] != 0) {
    return bad(idx_path, "document indices must start with 0");
  }
  for (uint64_t k = 1; k < d; ++k) {
    if (ds->document_indices_[k] < ds->document_indices_[k - 1] ||
        ds->document_indices_[k] > int64_t(n)) {
      return bad(idx_path, absl::StrCat("document index ", k, " = ", ds->document_indices_[k],
                                        " is out of order or past the ", n, " sequences"));
    }
  }
  if (ds->document_indices_[d - 1] != int64_t(n)) {
    return bad(idx_path, absl::StrCat("last document index is ", ds->document_indices_[d - 1],
                                      ", expected the sequence count ", n));
  }

  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> bin, OpenDatasetFile(bin_path));
  RETURN_IF_ERROR(CheckIndexTilesBin(*ds, idx_path, bin_path, int64_t(bin->size())));
  ds->bin_ = std::move(bin);
  return ds;
}

absl::Status IndexedDataset::CheckIndexTilesBin(IndexedDataset& ds, const std::string& idx_path,
                                                const std::string& bin_path, int64_t bin_size) {
  // Megatron's writer lays the sequences end to end from byte 0, so the pointers are
  // the running sum of the lengths and the last sequence ends at the end of the .bin.
  // Anything else is an .idx of other data beside this .bin (another corpus, a stale
  // copy), which would otherwise train silently on the wrong tokens.
  const int64_t item = TokenDTypeSize(ds.dtype_);
  int64_t end = 0;  // where the next sequence must start
  for (size_t i = 0; i < ds.sequence_lengths_.size(); ++i) {
    const int64_t len = ds.sequence_lengths_[i];
    const int64_t ptr = ds.sequence_pointers_[i];
    if (len < 0 || ptr < 0 || ptr > bin_size || len > (bin_size - ptr) / item) {
      return absl::InvalidArgumentError(absl::StrCat(
          bin_path, ": truncated or index points past the end: sequence ", i, " spans bytes [", ptr,
          ", ", ptr + len * item, ") but the .bin has ", bin_size, " bytes"));
    }
    if (ptr != end) {
      return absl::InvalidArgumentError(absl::StrCat(
          idx_path, " does not describe ", bin_path, ": sequence ", i, " starts at byte ", ptr,
          " where the sequences before it end at byte ", end,
          " (Megatron's files hold them end to end); rebuild the pair with preprocess, or "
          "copy the .idx that was written with this .bin"));
    }
    end += len * item;
    ds.num_tokens_ += len;
  }
  if (end != bin_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        idx_path, " does not describe ", bin_path, ": its ", ds.sequence_lengths_.size(),
        " sequences of ", TokenDTypeName(ds.dtype_), " tokens take ", end, " bytes but ", bin_path,
        " holds ", bin_size,
        " (an .idx of another corpus or a stale copy beside this .bin); rebuild the pair with "
        "preprocess, or copy the .idx that was written with this .bin"));
  }
  return absl::OkStatus();
}

absl::Status IndexedDataset::CheckRange(int64_t i, int64_t offset, int64_t* length) const {
  if (i < 0 || i >= num_sequences()) {
    return absl::OutOfRangeError(absl::StrCat(prefix_, ": sequence ", i, " of ", num_sequences()));
  }
  const int64_t len = sequence_lengths_[i];
  if (*length < 0) *length = len - offset;
  if (offset < 0 || *length < 0 || offset + *length > len) {
    return absl::OutOfRangeError(absl::StrCat(prefix_, ": tokens [", offset, ", ", offset + *length,
                                              ") of sequence ", i, " with ", len, " tokens"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> IndexedDataset::Get(int64_t i, int64_t offset,
                                                         int64_t length) const {
  RETURN_IF_ERROR(CheckRange(i, offset, &length));
  const char* base = bin_->data() + sequence_pointers_[i];
  std::vector<int64_t> out(length);
  for (int64_t k = 0; k < length; ++k) out[k] = LoadToken(dtype_, base, offset + k);
  return out;
}

absl::Status IndexedDataset::AppendTokens(int64_t i, int64_t offset, int64_t length,
                                          std::vector<int32_t>* out) const {
  RETURN_IF_ERROR(CheckRange(i, offset, &length));
  const char* base = bin_->data() + sequence_pointers_[i];
  out->reserve(out->size() + length);
  for (int64_t k = 0; k < length; ++k) {
    out->push_back(static_cast<int32_t>(LoadToken(dtype_, base, offset + k)));
  }
  return absl::OkStatus();
}

std::optional<int64_t> IndexedDataset::LargestTokenId(int64_t max_tokens) const {
  if (num_tokens_ > max_tokens) return std::nullopt;
  int64_t largest = -1;
  for (int64_t i = 0; i < num_sequences(); ++i) {
    const char* base = bin_->data() + sequence_pointers_[i];
    for (int64_t k = 0; k < sequence_lengths_[i]; ++k) {
      largest = std::max(largest, LoadToken(dtype_, base, k));
    }
  }
  return largest;
}

}  // namespace conveyor
