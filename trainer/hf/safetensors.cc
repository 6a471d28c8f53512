#include "trainer/hf/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "data/python_json.h"
#include "runtime/dtype.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/hf/json_text.h"

namespace conveyor {
namespace {

// The format is little-endian; so is every machine Conveyor targets (x86-64, aarch64
// Linux). Refusing to build elsewhere beats writing files nobody else can read.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

constexpr int64_t kLengthBytes = 8;
// A header larger than this is a corrupt length, not a model: even a model with a
// million tensors needs far less. (The reference implementation uses the same bound.)
constexpr int64_t kMaxHeaderBytes = 100 * 1000 * 1000;
constexpr char kMetadataKey[] = "__metadata__";

// Element sizes of the dtypes the format defines; a header naming any other dtype
// is refused because its tensors' byte sizes could not be checked.
int64_t DtypeBytes(absl::string_view dtype) {
  static const std::map<std::string, int64_t, std::less<>>* const kSizes =
      new std::map<std::string, int64_t, std::less<>>{
          {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
          {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
          {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  const auto it = kSizes->find(dtype);
  return it == kSizes->end() ? 0 : it->second;
}

// IEEE half to float, exactly (every half is a float).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {  // infinity or NaN
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal half: normalise into a float exponent
    exponent = 113;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// bfloat16 is the top half of a float.
float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// A tensor's values as `dtype`'s bytes.
std::string EncodeValues(const std::vector<float>& values, HfDtype dtype) {
  std::string bytes(values.size() * HfDtypeBytes(dtype), '\0');
  if (dtype == HfDtype::kF32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits =
        dtype == HfDtype::kBF16 ? ToBFloat16(values[i]).bits : FloatToHalfBits(values[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

// An exact non-negative JSON integer.
bool AsCount(const Json& v, int64_t* out) {
  if (!v.is_number() || AsDouble(v) < 0 || double(AsInt64(v)) != AsDouble(v)) return false;
  *out = AsInt64(v);
  return true;
}

}  // namespace

bool IsWeightDtype(absl::string_view dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

int64_t WidenElements(absl::string_view dtype, const void* bytes, int64_t count, float* out) {
  int64_t non_finite = 0;
  if (dtype == "F32") {
    std::memcpy(out, bytes, size_t(count) * sizeof(float));
    for (int64_t i = 0; i < count; ++i) non_finite += std::isfinite(out[i]) ? 0 : 1;
    return non_finite;
  }
  const bool half = dtype == "F16";
  for (int64_t i = 0; i < count; ++i) {
    uint16_t raw;
    std::memcpy(&raw, static_cast<const char*>(bytes) + 2 * i, sizeof(raw));
    out[i] = half ? HalfToFloat(raw) : Bf16ToFloat(raw);
    non_finite += std::isfinite(out[i]) ? 0 : 1;
  }
  return non_finite;
}

absl::Status NonFiniteWeightsError(absl::string_view tensor, absl::string_view file, int64_t bad,
                                   int64_t read) {
  return absl::InvalidArgumentError(absl::StrCat(
      "tensor ", tensor, " in ", file, " holds ", bad, " NaN or infinite value",
      bad == 1 ? "" : "s", " (of ", read,
      " elements read): these weights cannot be trained from; load a copy saved before "
      "they went bad"));
}

const char* SafetensorsDtypeName(HfDtype dtype) {
  return dtype == HfDtype::kBF16 ? "BF16" : dtype == HfDtype::kF16 ? "F16" : "F32";
}

const char* TorchDtypeName(HfDtype dtype) {
  return dtype == HfDtype::kBF16 ? "bfloat16" : dtype == HfDtype::kF16 ? "float16" : "float32";
}

int64_t HfDtypeBytes(HfDtype dtype) { return dtype == HfDtype::kF32 ? 4 : 2; }

uint16_t FloatToHalfBits(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof(u));
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {  // infinity, or NaN (kept quiet)
    return sign | 0x7C00u | (magnitude > 0x7F800000u ? 0x0200u : 0u);
  }
  // 65520 = 0x477FF000 lies halfway between the largest half, 65504 (odd mantissa),
  // and 65536: it and everything above round to infinity.
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  auto round = [](uint32_t kept, uint32_t dropped, uint32_t half) {
    return kept + (dropped > half || (dropped == half && (kept & 1u)) ? 1u : 0u);
  };
  const uint32_t exponent = magnitude >> 23;  // biased by 127
  if (exponent < 113) {                       // below 2^-14: a subnormal half, m * 2^-24
    if (exponent < 102) return sign;          // below 2^-25 (half of 2^-24): rounds to zero
    const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    // m may round up to 0x400, which is the encoding of the smallest normal.
    return sign | static_cast<uint16_t>(
                      round(mantissa >> shift, mantissa & ((1u << shift) - 1), 1u << (shift - 1)));
  }
  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits; a carry out of
  // the mantissa moves into the exponent, as it should.
  const uint32_t kept = (magnitude >> 13) - ((127u - 15u) << 10);
  return sign | static_cast<uint16_t>(round(kept, magnitude & 0x1FFFu, 0x1000u));
}

absl::StatusOr<std::string> EncodeSafetensorsHeader(
    const HfTensorMap& tensors, const std::map<std::string, std::string>& metadata, HfDtype dtype) {
  std::string json = "{";
  bool first = true;
  auto separate = [&] {
    if (!first) json += ',';
    first = false;
  };
  if (!metadata.empty()) {
    separate();
    json += absl::StrCat(JsonQuote(kMetadataKey), ":{");
    bool first_key = true;
    for (const auto& [key, value] : metadata) {
      if (!first_key) json += ',';
      first_key = false;
      json += absl::StrCat(JsonQuote(key), ":", JsonQuote(value));
    }
    json += '}';
  }
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor name \"", name, "\" is reserved by the safetensors format"));
    }
    if (NumElements(tensor.shape) != int64_t(tensor.data.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, ": shape ", FormatShape(tensor.shape), " has ",
          NumElements(tensor.shape), " elements but its data has ", tensor.data.size()));
    }
    const int64_t bytes = int64_t(tensor.data.size()) * HfDtypeBytes(dtype);
    separate();
    json += absl::StrCat(JsonQuote(name), ":{\"dtype\":\"", SafetensorsDtypeName(dtype),
                         "\",\"shape\":[", absl::StrJoin(tensor.shape, ","), "],\"data_offsets\":[",
                         offset, ",", offset + bytes, "]}");
    offset += bytes;
  }
  json += '}';
  // Pad so that the data starts 8-byte aligned: readers that map the file can then
  // view any tensor in place.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string header(kLengthBytes, '\0');
  const uint64_t length = json.size();
  std::memcpy(header.data(), &length, kLengthBytes);
  return header + json;
}

absl::Status WriteSafetensors(const std::string& path, const HfTensorMap& tensors,
                              const std::map<std::string, std::string>& metadata, HfDtype dtype) {
  ASSIGN_OR_RETURN(const std::string header, EncodeSafetensorsHeader(tensors, metadata, dtype));
  const std::string temp = path + ".tmp";
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(temp));
    RETURN_IF_ERROR(file.Append(header.data(), int64_t(header.size())));
    for (const auto& [name, tensor] : tensors) {
      const std::string bytes = EncodeValues(tensor.data, dtype);
      RETURN_IF_ERROR(file.Append(bytes.data(), int64_t(bytes.size())));
    }
    RETURN_IF_ERROR(file.SyncAndClose());
    return Rename(temp, path);
  }();
  if (!status.ok()) {
    RemoveFile(temp).IgnoreError();  // best effort; the original error matters more
    return status;
  }
  return SyncDir(FolderOf(path));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(ReadableFile file, ReadableFile::Open(path));
  SafetensorsFile opened(std::move(file));
  RETURN_IF_ERROR(opened.ParseHeader());
  return opened;
}

namespace {

// "safetensors file <path>: <parts>", the start of every header error.
template <typename... Parts>
absl::Status InvalidFile(const std::string& path, const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors file ", path, ": ", parts...));
}

// The byte size of `shape` elements of `element_bytes` each, saturating at
// int64's maximum instead of overflowing on a hostile shape (nullopt then).
std::optional<int64_t> ShapeBytes(const std::vector<int64_t>& shape, int64_t element_bytes) {
  int64_t bytes = element_bytes;
  bool saturated = false;
  for (const int64_t d : shape) {
    if (d == 0) {
      bytes = 0;  // an empty tensor, however large the other dimensions
      saturated = false;
    } else if (saturated || bytes > std::numeric_limits<int64_t>::max() / d) {
      saturated = true;
    } else {
      bytes *= d;
    }
  }
  return saturated ? std::nullopt : std::optional<int64_t>(bytes);
}

// One tensor's header entry; offsets relative to the data area of `data_bytes`.
absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& path, const std::string& key,
                                            const Json& value, int64_t data_bytes) {
  auto bad = [&](auto&&... parts) { return InvalidFile(path, "tensor ", key, ": ", parts...); };
  if (!value.is_object()) return bad("entry is not an object");
  const Json* dtype = FindMember(value, "dtype");
  const Json* shape = FindMember(value, "shape");
  const Json* offsets = FindMember(value, "data_offsets");
  if (dtype == nullptr || !dtype->is_string()) return bad("missing string \"dtype\"");
  if (shape == nullptr || !shape->is_array()) return bad("missing array \"shape\"");
  if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2) {
    return bad("\"data_offsets\" must be an array [begin, end]");
  }
  SafetensorsEntry entry;
  entry.dtype = AsString(*dtype);
  const int64_t element_bytes = DtypeBytes(entry.dtype);
  if (element_bytes == 0) {
    return bad("unknown dtype \"", entry.dtype,
               "\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, "
               "U32, F32, F64, I64, U64)");
  }
  for (const Json& dim : *shape) {
    int64_t d = 0;
    if (!AsCount(dim, &d)) return bad("shape entries must be non-negative integers");
    entry.shape.push_back(d);
  }
  const std::optional<int64_t> bytes = ShapeBytes(entry.shape, element_bytes);
  int64_t begin = 0, end = 0;
  if (!AsCount((*offsets)[0], &begin) || !AsCount((*offsets)[1], &end) || begin > end) {
    return bad("\"data_offsets\" must be non-negative integers with begin <= end");
  }
  if (end > data_bytes) {
    return bad("data_offsets [", begin, ", ", end, "] run past the ", data_bytes,
               " data bytes of the file: truncated or corrupt");
  }
  if (!bytes.has_value() || end - begin != *bytes) {
    return bad("data_offsets [", begin, ", ", end, "] span ", end - begin, " bytes but shape ",
               FormatShape(entry.shape), " of ", entry.dtype, " needs ",
               bytes.has_value() ? absl::StrCat(*bytes) : std::string("more than the file holds"));
  }
  entry.begin = begin;
  entry.end = end;
  return entry;
}

}  // namespace

absl::StatusOr<Json> SafetensorsFile::ReadHeaderJson(int64_t* header_length) const {
  const std::string& name = file_.path();
  const int64_t file_size = file_.size();
  if (file_size < kLengthBytes) {
    return InvalidFile(name, "only ", file_size,
                       " bytes, too short for the 8-byte header length: not a safetensors "
                       "file, or truncated");
  }
  uint64_t length = 0;
  RETURN_IF_ERROR(file_.ReadAt(0, &length, kLengthBytes));
  if (length > uint64_t(file_size - kLengthBytes) || length > uint64_t(kMaxHeaderBytes)) {
    return InvalidFile(name, "header length ", length, " (the first 8 bytes) exceeds the ",
                       file_size - kLengthBytes,
                       " bytes that follow it: not a safetensors file, or truncated");
  }
  if (length < 2) {
    return InvalidFile(name, "header length ", length, " is too short for a JSON object");
  }
  std::string text(length, '\0');
  RETURN_IF_ERROR(file_.ReadAt(kLengthBytes, text.data(), int64_t(length)));
  absl::StatusOr<Json> parsed = ParseJson(text);
  if (!parsed.ok()) {
    return InvalidFile(name, "header is not valid JSON: ", parsed.status().message());
  }
  if (!parsed->is_object()) return InvalidFile(name, "header is not a JSON object");
  *header_length = int64_t(length);
  return parsed;
}

absl::Status SafetensorsFile::ParseHeader() {
  const std::string& name = file_.path();
  int64_t length = 0;
  ASSIGN_OR_RETURN(const Json header, ReadHeaderJson(&length));
  const int64_t data_start = kLengthBytes + length;
  const int64_t data_bytes = file_.size() - data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) return InvalidFile(name, "\"__metadata__\" is not an object");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return InvalidFile(name, "\"__metadata__\" entry \"", meta_key, "\" is not a string");
        }
        metadata_[meta_key] = AsString(meta_value);
      }
      continue;
    }
    if (entries_.count(key) != 0) {
      return InvalidFile(name, "tensor ", key, ": appears twice in the header");
    }
    ASSIGN_OR_RETURN(SafetensorsEntry entry, ParseEntry(name, key, value, data_bytes));
    entry.begin += data_start;
    entry.end += data_start;
    entries_.emplace(key, std::move(entry));
  }
  return CheckDataTiling(data_start, length);
}

absl::Status SafetensorsFile::CheckDataTiling(int64_t data_start, int64_t header_length) const {
  // As the format requires, the tensors tile the data area exactly: in offset
  // order each starts where the one before it ends, the first at 0, the last at
  // the end of the file. A header length that is a few bytes off (the JSON
  // still parsing thanks to its padding) shifts every tensor, and shows here.
  const std::string& name = file_.path();
  const int64_t data_bytes = file_.size() - data_start;
  std::vector<std::pair<std::pair<int64_t, int64_t>, const std::string*>> by_offset;
  for (const auto& [key, entry] : entries_) {
    by_offset.push_back({{entry.begin - data_start, entry.end - data_start}, &key});
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, *a.second) < std::tie(b.first, *b.second);
  });
  int64_t covered = 0;  // the data bytes the tensors so far tile
  const std::string* previous = nullptr;
  for (const auto& [offsets, key] : by_offset) {
    const auto [begin, end] = offsets;
    if (begin < covered) {
      const SafetensorsEntry& p = entries_.at(*previous);
      return InvalidFile(name, "tensors ", *previous, " and ", *key, " overlap (data_offsets [",
                         p.begin - data_start, ", ", p.end - data_start, "] and [", begin, ", ",
                         end, "]): corrupt header");
    }
    if (begin > covered) {
      return InvalidFile(
          name, "tensor ", *key, ": data_offsets [", begin, ", ", end, "] leave bytes [", covered,
          ", ", begin, ") of the data unused",
          previous == nullptr ? "" : absl::StrCat(" (after tensor ", *previous, ")"),
          ": the format requires the tensors to cover the data exactly; corrupt header");
    }
    covered = end;
    previous = key;
  }
  if (covered != data_bytes) {
    return InvalidFile(
        name, "the tensors cover ", covered, " bytes of data",
        previous == nullptr ? "" : absl::StrCat(" (the last is tensor ", *previous, ")"),
        " but the file holds ", data_bytes, " after the ", header_length,
        "-byte header: the header length (the first 8 bytes) is off, or bytes were appended; "
        "corrupt file");
  }
  return absl::OkStatus();
}

const SafetensorsEntry* SafetensorsFile::Find(absl::string_view name) const {
  const auto it = entries_.find(std::string(name));
  return it == entries_.end() ? nullptr : &it->second;
}

absl::StatusOr<HfTensor> SafetensorsFile::Read(absl::string_view name,
                                               FiniteCheck check_finite) const {
  const SafetensorsEntry* entry = Find(name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("safetensors file ", path(), " has no tensor ", name));
  }
  HfTensor tensor;
  tensor.shape = entry->shape;
  const int64_t n = NumElements(entry->shape);
  tensor.data.resize(n);
  if (!IsWeightDtype(entry->dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors file ", path(), ": tensor ", name, " has dtype ", entry->dtype,
                     "; only floating-point weights (F32, F16, BF16) can be loaded"));
  }
  std::string raw(entry->end - entry->begin, '\0');
  RETURN_IF_ERROR(file_.ReadAt(entry->begin, raw.data(), int64_t(raw.size())));
  if (const int64_t bad = WidenElements(entry->dtype, raw.data(), n, tensor.data.data());
      bad > 0 && check_finite == FiniteCheck::kRefuseNonFinite) {
    return NonFiniteWeightsError(name, path(), bad, n);
  }
  return tensor;
}

absl::StatusOr<HfTensorMap> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::Open(path));
  HfTensorMap tensors;
  for (const auto& [name, entry] : file.entries()) {
    ASSIGN_OR_RETURN(tensors[name], file.Read(name));
  }
  return tensors;
}

}  // namespace conveyor
