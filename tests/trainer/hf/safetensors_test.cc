// safetensors: what the writer puts on disk byte for byte, that the reader gets it
// back, and that malformed files are refused with messages naming file and tensor.
#include "trainer/hf/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/hf/hf_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::FreshDir;

std::string LengthPrefix(uint64_t n) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = char((n >> (8 * i)) & 0xFF);  // little-endian
  return bytes;
}

// A file with the given header text and data bytes; `length` overrides the prefix.
std::string WriteRaw(const std::string& header, const std::string& data, int64_t length = -1) {
  const std::string path = FreshDir("raw") + "/model.safetensors";
  const std::string contents =
      LengthPrefix(length >= 0 ? uint64_t(length) : header.size()) + header + data;
  EXPECT_TRUE(WriteFileDurably(path, contents).ok());
  return path;
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

HfTensorMap TwoTensors() {
  HfTensorMap tensors;
  tensors["b"] = {{2}, {1.5f, -2.0f}};
  tensors["a"] = {{1, 3}, {0.25f, 3.0f, -7.5f}};
  return tensors;
}

TEST(SafetensorsTest, HeaderIsSortedContiguousAndPaddedToEightBytes) {
  const absl::StatusOr<std::string> header =
      EncodeSafetensorsHeader(TwoTensors(), {{"format", "pt"}});
  ASSERT_TRUE(header.ok()) << header.status();
  const std::string json =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1,3],\"data_offsets\":[0,12]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}";
  const std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
  EXPECT_EQ(*header, LengthPrefix(padded.size()) + padded);
  EXPECT_EQ(header->size() % 8, 0u);
}

TEST(SafetensorsTest, FileIsHeaderThenDataInNameOrder) {
  const std::string path = FreshDir("bytes") + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, TwoTensors()).ok());
  const absl::StatusOr<std::string> contents = ReadSmallFile(path);
  ASSERT_TRUE(contents.ok());
  const absl::StatusOr<std::string> header = EncodeSafetensorsHeader(TwoTensors(), {});
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(*contents, *header + FloatBytes({0.25f, 3.0f, -7.5f, 1.5f, -2.0f}));
  EXPECT_FALSE(PathExists(path + ".tmp"));
}

TEST(SafetensorsTest, RoundTrip) {
  const std::string path = FreshDir("round_trip") + "/model.safetensors";
  HfTensorMap tensors = TwoTensors();
  tensors["empty"] = {{0, 4}, {}};
  tensors["scalar"] = {{}, {42.0f}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());

  const absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->entries().size(), 4u);
  const absl::StatusOr<HfTensorMap> read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  for (const auto& [name, tensor] : tensors) {
    ASSERT_EQ(read->count(name), 1u) << name;
    EXPECT_EQ(read->at(name).shape, tensor.shape) << name;
    EXPECT_EQ(read->at(name).data, tensor.data) << name;
  }
}

TEST(SafetensorsTest, WidensHalfAndBfloat16) {
  // F16 1.0 = 0x3C00, -2.0 = 0xC000, 2^-24 (smallest subnormal) = 0x0001;
  // BF16 0.5 = 0x3F00, -3.0 = 0xC040.
  const std::string data("\x00\x3C\x00\xC0\x01\x00\x00\x3F\x40\xC0", 10);
  const std::string path = WriteRaw(
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[6,10]}}",
      data);
  const absl::StatusOr<HfTensorMap> read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->at("h").data, ElementsAre(1.0f, -2.0f, 5.9604644775390625e-8f));
  EXPECT_THAT(read->at("b").data, ElementsAre(0.5f, -3.0f));
}

// The reference for export --dtype, computed in double without bit tricks: the grid of
// a binary format with `fraction_bits` and smallest normal exponent `min_exponent` is
// spaced 2^(max(exponent of x, min_exponent) - fraction_bits); nearbyint rounds to it,
// ties to even (the default rounding mode); beyond `max_finite` is infinity.
double RoundToFormat(double x, int fraction_bits, int min_exponent, double max_finite) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  const int exponent = std::max(std::ilogb(x), min_exponent);
  const double spacing = std::ldexp(1.0, exponent - fraction_bits);
  const double rounded = std::nearbyint(x / spacing) * spacing;
  return std::fabs(rounded) > max_finite ? std::copysign(INFINITY, x) : rounded;
}

// IEEE binary16 bits to their value, from the format's definition.
double HalfValue(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F, fraction = bits & 0x3FF;
  const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  if (exponent == 0x1F) return fraction == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

double Bf16Value(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

// Every 997th float bit pattern (all exponents, subnormals, both signs, infinities, NaNs)
// and constructed ties, written as F16 and BF16 and read back raw.
TEST(SafetensorsTest, HalfAndBfloat16RoundToNearestEven) {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 997) {
    const uint32_t b = uint32_t(bits);
    float f;
    std::memcpy(&f, &b, sizeof(f));
    values.push_back(f);
  }
  for (const double tie : {1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
                           1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8),
                           std::ldexp(1.0, -25), 3 * std::ldexp(1.0, -25), 65520.0, 65519.0}) {
    values.push_back(float(tie));
    values.push_back(float(-tie));
  }
  const std::string dir = FreshDir("dtypes");
  const HfTensorMap tensors = {{"t", {{int64_t(values.size())}, values}}};
  for (const HfDtype dtype : {HfDtype::kF16, HfDtype::kBF16}) {
    const std::string path = dir + "/" + SafetensorsDtypeName(dtype) + ".safetensors";
    ASSERT_TRUE(WriteSafetensors(path, tensors, {}, dtype).ok());
    const absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->Find("t")->dtype, SafetensorsDtypeName(dtype));
    const absl::StatusOr<std::string> bytes = ReadSmallFile(path);
    ASSERT_TRUE(bytes.ok());
    const char* data = bytes->data() + file->Find("t")->begin;
    int64_t mismatches = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      const bool half = dtype == HfDtype::kF16;
      const double got = half ? HalfValue(bits) : Bf16Value(bits);
      const double want = half ? RoundToFormat(values[i], 10, -14, 65504.0)
                               : RoundToFormat(values[i], 7, -126, 0x1.FEp127);
      const bool same = std::isnan(want) ? std::isnan(got)
                                         : got == want && std::signbit(got) == std::signbit(want);
      if (!same && ++mismatches <= 5) {
        ADD_FAILURE() << SafetensorsDtypeName(dtype) << " of " << values[i] << " (" << std::hexfloat
                      << values[i] << "): got " << got << ", want " << want;
      }
    }
    EXPECT_EQ(mismatches, 0) << SafetensorsDtypeName(dtype);
  }
}

TEST(SafetensorsTest, RejectsFileShorterThanTheLengthPrefix) {
  const std::string path = FreshDir("short") + "/model.safetensors";
  ASSERT_TRUE(WriteFileDurably(path, "abc").ok());
  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), AllOf(HasSubstr(path), HasSubstr("too short")));
}

TEST(SafetensorsTest, RejectsHeaderLengthPastTheEndOfTheFile) {
  const std::string path = WriteRaw("{}", "", /*length=*/1000);
  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr(path), HasSubstr("header length 1000"), HasSubstr("truncated")));
}

TEST(SafetensorsTest, RejectsHeaderThatIsNotJson) {
  const std::string path = WriteRaw("{\"a\": [", "");
  const auto file = SafetensorsFile::Open(path);
  EXPECT_THAT(file.status().message(), AllOf(HasSubstr(path), HasSubstr("not valid JSON")));
}

TEST(SafetensorsTest, RejectsOverlappingTensors) {
  const std::string path = WriteRaw(
      "{\"first\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"second\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
      std::string(12, '\0'));
  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), AllOf(HasSubstr(path), HasSubstr("first"),
                                             HasSubstr("second"), HasSubstr("overlap")));
}

// A header length a few bytes short still parses (the JSON's padding is
// spaces) but shifts every tensor; it used to load.
TEST(SafetensorsTest, RejectsAHeaderLengthThatIsOffByAFewBytes) {
  const std::string json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string path =
      WriteRaw(json + "    ", FloatBytes({1.0f, 2.0f}), /*length=*/int64_t(json.size()));
  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file.status().message(),
            "safetensors file " + path +
                ": the tensors cover 8 bytes of data (the last is tensor w) but the file holds 12 "
                "after the " +
                std::to_string(json.size()) +
                "-byte header: the header length (the first 8 bytes) is off, or bytes were "
                "appended; corrupt file");
}

TEST(SafetensorsTest, RejectsTrailingBytesAfterTheData) {
  const std::string path = FreshDir("trailing") + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, TwoTensors()).ok());
  const absl::StatusOr<std::string> contents = ReadSmallFile(path);
  ASSERT_TRUE(contents.ok());
  ASSERT_TRUE(WriteFileDurably(path, *contents + "junk").ok());
  const auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr(path), HasSubstr("the tensors cover 20 bytes of data (the last is "
                                               "tensor b) but the file holds 24 after the ")));
}

TEST(SafetensorsTest, RejectsGapsInTheData) {
  const std::string gap = WriteRaw(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
      std::string(20, '\0'));
  const auto file = SafetensorsFile::Open(gap);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file.status().message(),
            "safetensors file " + gap +
                ": tensor b: data_offsets [12, 20] leave bytes [8, 12) of the data unused (after "
                "tensor a): the format requires the tensors to cover the data exactly; corrupt "
                "header");
  const std::string late_start = WriteRaw(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", std::string(12, '\0'));
  const auto late = SafetensorsFile::Open(late_start);
  EXPECT_THAT(late.status().message(),
              AllOf(HasSubstr(late_start),
                    HasSubstr("tensor a: data_offsets [4, 12] leave bytes [0, 4) of the data "
                              "unused: ")));
}

TEST(SafetensorsTest, RejectsOffsetsPastTheData) {
  const std::string path = WriteRaw(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", std::string(8, '\0'));
  const auto file = SafetensorsFile::Open(path);
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr(path), HasSubstr("tensor w"), HasSubstr("run past")));
}

TEST(SafetensorsTest, RejectsShapeThatDoesNotMatchTheOffsets) {
  const std::string path = WriteRaw(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", std::string(8, '\0'));
  const auto file = SafetensorsFile::Open(path);
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr("tensor w"), HasSubstr("span 8 bytes"), HasSubstr("needs 12")));
}

TEST(SafetensorsTest, RejectsHugeShapeWithoutOverflow) {
  const std::string path = WriteRaw(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,4611686018427387904],"
      "\"data_offsets\":[0,8]}}",
      std::string(8, '\0'));
  const auto file = SafetensorsFile::Open(path);
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr("tensor w"), HasSubstr("more than the file holds")));
}

TEST(SafetensorsTest, RejectsUnknownDtype) {
  const std::string path = WriteRaw(
      "{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", std::string(8, '\0'));
  const auto file = SafetensorsFile::Open(path);
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr(path), HasSubstr("tensor w"), HasSubstr("unknown dtype \"F33\"")));
}

TEST(SafetensorsTest, ReadingIntegerTensorAsWeightsNamesTheDtype) {
  const std::string path = WriteRaw(
      "{\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", std::string(8, '\0'));
  const absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();  // a valid file; only its dtype is unusable
  const auto read = file->Read("ids");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr(path), HasSubstr("ids"), HasSubstr("dtype I64")));
  EXPECT_EQ(file->Read("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, RefusesDataThatDoesNotMatchTheShape) {
  HfTensorMap tensors;
  tensors["w"] = {{2, 2}, {1.0f, 2.0f, 3.0f}};
  const absl::Status status =
      WriteSafetensors(FreshDir("bad_shape") + "/model.safetensors", tensors);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor w"));
}

}  // namespace
}  // namespace conveyor
