// --squared-relu's rules: Megatron asserts it excludes --swiglu; the experts do not have
// it; the GPT-2 export, whose config names GELU (gelu_new), refuses it by name.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/trainer/config_fixtures.h"
#include "trainer/config/config_validation.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

Config Valid() {
  Config c = testing_util::SmallestValidConfig();
  c.mutable_model()->set_squared_relu(true);
  return c;
}

TEST(SquaredReluConfigTest, ExcludesSwigluAndExperts) {
  Config c = Valid();
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
  c.mutable_model()->set_swiglu(true);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--squared-relu and --swiglu are exclusive")));
  c = Valid();
  c.mutable_model()->set_num_experts(4);
  c.mutable_model()->set_disable_bias_linear(true);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--squared-relu with --num-experts: the experts' squared "
                                     "ReLU is not implemented")));
}

TEST(SquaredReluConfigTest, Gpt2ExportRefusesItByName) {
  const absl::Status status = CheckGpt2Architecture(Valid());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("--squared-relu is set; the GPT-2 export writes activation_function "
                        "gelu_new"));
  Config gelu = Valid();
  gelu.mutable_model()->set_squared_relu(false);
  EXPECT_TRUE(CheckGpt2Architecture(gelu).ok()) << CheckGpt2Architecture(gelu);
}

}  // namespace
}  // namespace conveyor
