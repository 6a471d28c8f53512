// Hugging Face weights holding NaN or infinite values are refused at load, naming the
// tensor (its HF name), the file and how many values are bad: before, they loaded and
// the run stopped at iteration 1 advising a lower --lr. Through every reader: whole
// tensors (ReadHfWeights), element ranges (MappedHfWeights) and --load-hf's slices
// (ReadHfSlices), in F32 and in the half-precision formats.
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/hf/hf_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/config_validation.h"
#include "trainer/hf/export.h"
#include "trainer/hf/gpt2_config_json.h"
#include "trainer/hf/hf_folder.h"
#include "trainer/hf/mapped_weights.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::FreshDir;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A folder whose model.safetensors holds "good" [4] and "bad" [2, 3] with two NaN and
// one -inf, stored as `dtype`.
std::string FolderWithBadValues(HfDtype dtype, const std::string& name) {
  const HfTensorMap tensors = {{"good", {{4}, {1, 2, 3, 4}}},
                               {"bad", {{2, 3}, {0.5f, kNaN, 1, -kInf, kNaN, 2}}}};
  const std::string dir = FreshDir(name);
  EXPECT_TRUE(WriteHfWeights(dir, tensors, int64_t{1} << 30, dtype).ok());
  return dir;
}

TEST(NonFiniteWeightsTest, WholeTensorReadsNameTensorFileAndCount) {
  for (const HfDtype dtype : {HfDtype::kF32, HfDtype::kBF16, HfDtype::kF16}) {
    const std::string dir = FolderWithBadValues(dtype, "whole");
    const absl::StatusOr<HfTensorMap> read =
        ReadHfWeights(dir, [](const std::string&) { return false; });
    ASSERT_FALSE(read.ok()) << SafetensorsDtypeName(dtype);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(read.status().message(),
                AllOf(HasSubstr(absl::StrCat("tensor bad in ", dir, "/model.safetensors")),
                      HasSubstr("holds 3 NaN or infinite values (of 6 elements read)")))
        << SafetensorsDtypeName(dtype);
    // Skipping the bad tensor reads the rest.
    EXPECT_TRUE(ReadHfWeights(dir, [](const std::string& n) { return n == "bad"; }).ok());
  }
}

TEST(NonFiniteWeightsTest, RangeReadsCountWhatWasRead) {
  const std::string dir = FolderWithBadValues(HfDtype::kBF16, "ranges");
  absl::StatusOr<MappedHfWeights> weights = MappedHfWeights::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status();
  float out[6];
  ASSERT_TRUE(weights->Read("good", 0, 4, out).ok());
  ASSERT_TRUE(weights->Read("bad", 0, 1, out).ok());
  EXPECT_TRUE(weights->CheckFinite().ok());  // only finite values read so far
  ASSERT_TRUE(weights->Read("bad", 1, 3, out).ok());
  ASSERT_TRUE(weights->Read("bad", 4, 2, out).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  const absl::Status status = weights->CheckFinite();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(absl::StrCat("tensor bad in ", dir, "/model.safetensors")),
                    HasSubstr("holds 3 NaN or infinite values (of 6 elements read)")));
}

// --load-hf's reader, on a GPT-2 folder whose c_fc weight of layer 1 holds one NaN.
TEST(NonFiniteWeightsTest, LoadHfSlicesNamesTheHfTensor) {
  const Config config = testing_util::SmallGpt2Config();
  const absl::StatusOr<Gpt2Dims> dims = Gpt2DimsFromConfig(config, PaddedVocabSize(config));
  ASSERT_TRUE(dims.ok()) << dims.status();
  absl::StatusOr<HfTensorMap> hf = ConveyorToHfGpt2(testing_util::PatternParameters(*dims), *dims);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::string dir = FreshDir("slices");
  const std::string config_path = JoinPath(dir, kHfConfigFile);
  ASSERT_TRUE(WriteFileAtomically(config_path, Gpt2ConfigJson(config, *dims), config_path + ".tmp",
                                  Durability::kVisible)
                  .ok());
  HfElementRequest request;
  for (const auto& [name, shape] : GptParameterShapes(*dims)) {
    std::vector<int64_t>& indices = request[name];
    for (int64_t i = 0; i < NumElements(shape); ++i) indices.push_back(i);
  }
  ASSERT_TRUE(WriteHfWeights(dir, *hf, int64_t{1} << 30).ok());
  ASSERT_TRUE(ReadHfSlices(dir, config, request).ok());  // the finite folder loads

  (*hf)["transformer.h.1.mlp.c_fc.weight"].data[7] = kNaN;
  ASSERT_TRUE(WriteHfWeights(dir, *hf, int64_t{1} << 30).ok());
  const absl::StatusOr<HfElementValues> read = ReadHfSlices(dir, config, request);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr("--load-hf " + dir),
                    HasSubstr(absl::StrCat("tensor transformer.h.1.mlp.c_fc.weight in ", dir,
                                           "/model.safetensors holds 1 NaN or infinite value "))));
}

}  // namespace
}  // namespace conveyor
