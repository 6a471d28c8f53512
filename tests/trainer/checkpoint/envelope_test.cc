// The manifest's envelope tells truncation, corruption and foreign files apart.
#include "trainer/checkpoint/envelope.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

Manifest Sample() {
  Manifest m;
  m.set_format_version(1);
  m.set_iteration(42);
  m.mutable_config()->mutable_model()->set_hidden_size(64);
  TensorRecord* t = m.add_tensors();
  t->set_name("embedding.word_embeddings.weight");
  t->add_global_shape(16);
  t->add_global_shape(8);
  return m;
}

TEST(EnvelopeTest, RoundTrips) {
  const std::string sealed = SealEnvelope(Sample());
  EXPECT_EQ(sealed.substr(0, 8), "CVYCKPT1");
  Manifest back;
  ASSERT_TRUE(OpenEnvelope("m.pb", sealed, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), Sample().SerializeAsString());
}

TEST(EnvelopeTest, EveryTruncationIsDetected) {
  const std::string sealed = SealEnvelope(Sample());
  for (size_t n = 0; n < sealed.size(); ++n) {
    Manifest back;
    const absl::Status status = OpenEnvelope("dir/manifest.pb", sealed.substr(0, n), &back);
    ASSERT_TRUE(absl::IsDataLoss(status)) << n << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("dir/manifest.pb")) << n;
    if (n >= 8) {
      EXPECT_THAT(status.message(), HasSubstr("truncated")) << n;
    }
  }
}

TEST(EnvelopeTest, AFlippedPayloadByteFailsTheChecksum) {
  std::string sealed = SealEnvelope(Sample());
  sealed[kEnvelopeHeaderBytes + 3] ^= 0x10;
  Manifest back;
  const absl::Status status = OpenEnvelope("m.pb", sealed, &back);
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(), HasSubstr("m.pb is corrupt: crc32c"));
}

TEST(EnvelopeTest, AForeignFileIsNamedAsSuch) {
  Manifest back;
  const absl::Status status = OpenEnvelope("x.pb", "{\"json\": true, \"long enough\": 1}", &back);
  EXPECT_TRUE(absl::IsDataLoss(status));
  EXPECT_THAT(status.message(), HasSubstr("not a Conveyor checkpoint file"));
}

TEST(EnvelopeTest, FilesRoundTripAndMissingIsNotFound) {
  const std::string dir = testing_util::FreshDir("envelope");
  ASSERT_TRUE(WriteEnvelopeFile(dir + "/m.pb", Sample()).ok());
  Manifest back;
  ASSERT_TRUE(ReadEnvelopeFile(dir + "/m.pb", &back).ok());
  EXPECT_EQ(back.iteration(), 42);
  EXPECT_TRUE(absl::IsNotFound(ReadEnvelopeFile(dir + "/none.pb", &back)));
}

}  // namespace
}  // namespace conveyor
