#include "trainer/hf/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "data/json_lite.h"
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

// An exact non-negative JSON integer.
bool AsCount(const JsonValue& v, int64_t* out) {
  if (!v.is_number() || v.number() < 0 || double(v.integer()) != v.number()) return false;
  *out = v.integer();
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodeSafetensorsHeader(
    const HfTensorMap& tensors, const std::map<std::string, std::string>& metadata) {
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
    const int64_t bytes = int64_t(tensor.data.size() * sizeof(float));
    separate();
    json += absl::StrCat(JsonQuote(name), ":{\"dtype\":\"F32\",\"shape\":[",
                         absl::StrJoin(tensor.shape, ","), "],\"data_offsets\":[", offset, ",",
                         offset + bytes, "]}");
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
                              const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(const std::string header, EncodeSafetensorsHeader(tensors, metadata));
  const std::string temp = path + ".tmp";
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(temp));
    RETURN_IF_ERROR(file.Append(header.data(), int64_t(header.size())));
    for (const auto& [name, tensor] : tensors) {
      RETURN_IF_ERROR(file.Append(tensor.data.data(), int64_t(tensor.data.size() * sizeof(float))));
    }
    RETURN_IF_ERROR(file.SyncAndClose());
    return Rename(temp, path);
  }();
  if (!status.ok()) {
    RemoveFile(temp).IgnoreError();  // best effort; the original error matters more
    return status;
  }
  const size_t slash = path.rfind('/');
  return SyncDir(slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(ReadableFile file, ReadableFile::Open(path));
  SafetensorsFile opened(std::move(file));
  RETURN_IF_ERROR(opened.ParseHeader());
  return opened;
}

absl::Status SafetensorsFile::ParseHeader() {
  const std::string& name = file_.path();
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors file ", name, ": ", parts...));
  };
  const int64_t file_size = file_.size();
  if (file_size < kLengthBytes) {
    return invalid("only ", file_size,
                   " bytes, too short for the 8-byte header length: not a safetensors "
                   "file, or truncated");
  }
  uint64_t length = 0;
  RETURN_IF_ERROR(file_.ReadAt(0, &length, kLengthBytes));
  if (length > uint64_t(file_size - kLengthBytes) || length > uint64_t(kMaxHeaderBytes)) {
    return invalid("header length ", length, " (the first 8 bytes) exceeds the ",
                   file_size - kLengthBytes,
                   " bytes that follow it: not a safetensors file, or truncated");
  }
  if (length < 2) return invalid("header length ", length, " is too short for a JSON object");
  std::string text(length, '\0');
  RETURN_IF_ERROR(file_.ReadAt(kLengthBytes, text.data(), int64_t(length)));
  const absl::StatusOr<JsonValue> parsed = ParseJson(text);
  if (!parsed.ok()) return invalid("header is not valid JSON: ", parsed.status().message());
  if (!parsed->is_object()) return invalid("header is not a JSON object");

  const int64_t data_start = kLengthBytes + int64_t(length);
  const int64_t data_bytes = file_size - data_start;
  for (const auto& [key, value] : parsed->object()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) return invalid("\"__metadata__\" is not an object");
      for (const auto& [meta_key, meta_value] : value.object()) {
        if (!meta_value.is_string()) {
          return invalid("\"__metadata__\" entry \"", meta_key, "\" is not a string");
        }
        metadata_[meta_key] = meta_value.str();
      }
      continue;
    }
    auto bad = [&](auto&&... parts) { return invalid("tensor ", key, ": ", parts...); };
    if (entries_.count(key) != 0) return bad("appears twice in the header");
    if (!value.is_object()) return bad("entry is not an object");
    const JsonValue* dtype = value.Find("dtype");
    const JsonValue* shape = value.Find("shape");
    const JsonValue* offsets = value.Find("data_offsets");
    if (dtype == nullptr || !dtype->is_string()) return bad("missing string \"dtype\"");
    if (shape == nullptr || !shape->is_array()) return bad("missing array \"shape\"");
    if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2) {
      return bad("\"data_offsets\" must be an array [begin, end]");
    }
    SafetensorsEntry entry;
    entry.dtype = dtype->str();
    const int64_t element_bytes = DtypeBytes(entry.dtype);
    if (element_bytes == 0) {
      return bad("unknown dtype \"", entry.dtype,
                 "\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, "
                 "U32, F32, F64, I64, U64)");
    }
    // The byte size, saturating instead of overflowing on a hostile shape.
    int64_t bytes = element_bytes;
    bool saturated = false;
    for (const JsonValue& dim : shape->array()) {
      int64_t d = 0;
      if (!AsCount(dim, &d)) return bad("shape entries must be non-negative integers");
      entry.shape.push_back(d);
      if (d == 0) {
        bytes = 0;  // an empty tensor, however large the other dimensions
        saturated = false;
      } else if (saturated || bytes > std::numeric_limits<int64_t>::max() / d) {
        saturated = true;
      } else {
        bytes *= d;
      }
    }
    int64_t begin = 0, end = 0;
    if (!AsCount((*offsets)[0], &begin) || !AsCount((*offsets)[1], &end) || begin > end) {
      return bad("\"data_offsets\" must be non-negative integers with begin <= end");
    }
    if (end > data_bytes) {
      return bad("data_offsets [", begin, ", ", end, "] run past the ", data_bytes,
                 " data bytes of the file: truncated or corrupt");
    }
    if (saturated || end - begin != bytes) {
      return bad("data_offsets [", begin, ", ", end, "] span ", end - begin, " bytes but shape ",
                 FormatShape(entry.shape), " of ", entry.dtype, " needs ",
                 saturated ? std::string("more than the file holds") : absl::StrCat(bytes));
    }
    entry.begin = data_start + begin;
    entry.end = data_start + end;
    entries_.emplace(key, std::move(entry));
  }

  // As the format requires, the tensors tile the data area exactly: in offset
  // order each starts where the one before it ends, the first at 0, the last at
  // the end of the file. A header length that is a few bytes off (the JSON
  // still parsing thanks to its padding) shifts every tensor, and shows here.
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
      return invalid("tensors ", *previous, " and ", *key, " overlap (data_offsets [",
                     p.begin - data_start, ", ", p.end - data_start, "] and [", begin, ", ", end,
                     "]): corrupt header");
    }
    if (begin > covered) {
      return invalid("tensor ", *key, ": data_offsets [", begin, ", ", end, "] leave bytes [",
                     covered, ", ", begin, ") of the data unused",
                     previous == nullptr ? "" : absl::StrCat(" (after tensor ", *previous, ")"),
                     ": the format requires the tensors to cover the data exactly; corrupt "
                     "header");
    }
    covered = end;
    previous = key;
  }
  if (covered != data_bytes) {
    return invalid(
        "the tensors cover ", covered, " bytes of data",
        previous == nullptr ? "" : absl::StrCat(" (the last is tensor ", *previous, ")"),
        " but the file holds ", data_bytes, " after the ", length,
        "-byte header: the header length (the first 8 bytes) is off, or bytes were appended; "
        "corrupt file");
  }
  return absl::OkStatus();
}

const SafetensorsEntry* SafetensorsFile::Find(absl::string_view name) const {
  const auto it = entries_.find(std::string(name));
  return it == entries_.end() ? nullptr : &it->second;
}

absl::StatusOr<HfTensor> SafetensorsFile::Read(absl::string_view name) const {
  const SafetensorsEntry* entry = Find(name);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("safetensors file ", path(), " has no tensor ", name));
  }
  HfTensor tensor;
  tensor.shape = entry->shape;
  const int64_t n = NumElements(entry->shape);
  tensor.data.resize(n);
  const int64_t bytes = entry->end - entry->begin;
  if (entry->dtype == "F32") {
    RETURN_IF_ERROR(file_.ReadAt(entry->begin, tensor.data.data(), bytes));
  } else if (entry->dtype == "F16" || entry->dtype == "BF16") {
    std::vector<uint16_t> raw(n);
    RETURN_IF_ERROR(file_.ReadAt(entry->begin, raw.data(), bytes));
    const bool half = entry->dtype == "F16";
    for (int64_t i = 0; i < n; ++i) {
      tensor.data[i] = half ? HalfToFloat(raw[i]) : Bf16ToFloat(raw[i]);
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors file ", path(), ": tensor ", name, " has dtype ", entry->dtype,
                     "; only floating-point weights (F32, F16, BF16) can be loaded"));
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
