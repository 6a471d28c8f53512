#include "data/npy_file.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace conveyor {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;

struct ElementType {
  const char* descr;
  int bytes;
  bool is_signed;
};
constexpr ElementType kTypes[] = {
    {"<i2", 2, true}, {"<i4", 4, true}, {"<i8", 8, true}, {"<u4", 4, false}};

const ElementType* FindType(absl::string_view descr) {
  for (const ElementType& t : kTypes) {
    if (descr == t.descr) return &t;
  }
  return nullptr;
}

bool Fits(int64_t v, const ElementType& t) {
  if (t.bytes == 8) return true;
  if (!t.is_signed) return v >= 0 && v <= int64_t(std::numeric_limits<uint32_t>::max());
  const int64_t limit = int64_t{1} << (8 * t.bytes - 1);
  return v >= -limit && v < limit;
}

// Python's repr of a shape tuple: "(14,)", "(41, 2)", "()".
std::string ShapeRepr(absl::Span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace

absl::StatusOr<std::string> EncodeNpy(absl::string_view descr, absl::Span<const int64_t> shape,
                                      absl::Span<const int64_t> values) {
  const ElementType* type = FindType(descr);
  if (type == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("npy: unsupported dtype ", descr));
  }
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (count != int64_t(values.size())) {
    return absl::InvalidArgumentError(absl::StrCat("npy: shape ", ShapeRepr(shape), " holds ",
                                                   count, " values, got ", values.size()));
  }
  // numpy.save: dict keys sorted, then spaces so that magic + version +
  // length + header + '\n' is a multiple of 64 (a full 64 when already even).
  std::string header = absl::StrCat(
      "{'descr': '", descr, "', 'fortran_order': False, 'shape': ", ShapeRepr(shape), ", }");
  const size_t prefix = kMagicLen + 2 + 2;
  const size_t padding = kAlign - (prefix + header.size() + 1) % kAlign;
  header.append(padding, ' ');
  header.push_back('\n');
  if (header.size() > 65535) return absl::InvalidArgumentError("npy: header too long");

  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(char(header.size() & 0xff));
  out.push_back(char(header.size() >> 8));
  out += header;
  const size_t data_begin = out.size();
  out.resize(data_begin + values.size() * type->bytes);
  char* p = out.data() + data_begin;
  for (int64_t v : values) {
    if (!Fits(v, *type)) {
      return absl::InvalidArgumentError(absl::StrCat("npy: value ", v, " does not fit ", descr));
    }
    const uint64_t u = uint64_t(v);
    for (int b = 0; b < type->bytes; ++b) *p++ = char((u >> (8 * b)) & 0xff);
  }
  return out;
}

absl::StatusOr<NpyArray> DecodeNpy(absl::string_view bytes, absl::string_view name) {
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(name, ": ", what));
  };
  if (bytes.size() < kMagicLen + 4 ||
      bytes.substr(0, kMagicLen) != absl::string_view(kMagic, kMagicLen)) {
    return bad("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicLen]);
  size_t header_len, header_begin;
  if (major == 1) {
    header_len = size_t(static_cast<unsigned char>(bytes[8])) |
                 size_t(static_cast<unsigned char>(bytes[9])) << 8;
    header_begin = 10;
  } else if (major == 2 && bytes.size() >= 12) {
    header_len = 0;
    for (int b = 0; b < 4; ++b) {
      header_len |= size_t(static_cast<unsigned char>(bytes[8 + b])) << (8 * b);
    }
    header_begin = 12;
  } else {
    return bad(absl::StrCat("unsupported .npy version ", major));
  }
  if (header_begin + header_len > bytes.size()) return bad("truncated header");
  absl::string_view header = bytes.substr(header_begin, header_len);

  // The header is a Python dict literal; read the three keys it always has.
  auto value_of = [&](absl::string_view key) -> absl::string_view {
    const std::string quoted = absl::StrCat("'", key, "':");
    const size_t at = header.find(quoted);
    if (at == absl::string_view::npos) return {};
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(at + quoted.size()));
    if (rest.empty()) return {};
    const size_t end = rest[0] == '(' ? rest.find(')') + 1 : rest.find_first_of(",}");
    return rest.substr(0, end);
  };
  NpyArray out;
  out.descr = std::string(absl::StripSuffix(absl::StripPrefix(value_of("descr"), "'"), "'"));
  const ElementType* type = FindType(out.descr);
  if (type == nullptr) return bad(absl::StrCat("unsupported dtype '", out.descr, "'"));
  if (value_of("fortran_order") != "False") {
    return bad("Fortran-ordered arrays are not supported");
  }
  absl::string_view shape = value_of("shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    return bad("malformed shape");
  }
  int64_t count = 1;
  for (absl::string_view d :
       absl::StrSplit(shape.substr(1, shape.size() - 2), ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0) {
      return bad("malformed shape");
    }
    out.shape.push_back(v);
    if (__builtin_mul_overflow(count, v, &count)) return bad("shape overflows a 64-bit count");
  }
  const size_t data_begin = header_begin + header_len;
  if (count > int64_t(bytes.size()) / type->bytes) {
    return bad(absl::StrCat("shape ", shape, " of ", out.descr, " needs more than the ",
                            bytes.size(), " bytes of the file"));
  }
  if ((bytes.size() - data_begin) != size_t(count) * type->bytes) {
    return bad(absl::StrCat("holds ", bytes.size() - data_begin, " bytes of data, shape ", shape,
                            " of ", out.descr, " needs ", count * type->bytes));
  }
  out.values.resize(count);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data() + data_begin);
  for (int64_t i = 0; i < count; ++i, p += type->bytes) {
    uint64_t u = 0;
    for (int b = 0; b < type->bytes; ++b) u |= uint64_t(p[b]) << (8 * b);
    if (type->is_signed && type->bytes < 8 && (u >> (8 * type->bytes - 1)) & 1) {
      u |= ~uint64_t{0} << (8 * type->bytes);  // sign-extend
    }
    out.values[i] = int64_t(u);
  }
  return out;
}

}  // namespace conveyor
