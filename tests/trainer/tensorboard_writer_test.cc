// The event writer against TensorBoard's own bytes (tests/trainer/fixtures/
// tensorboard_records.txt, made by tools/gen_tensorboard_fixtures.py with the
// `tensorboard` package): record framing and event serialisation; and the background
// writer's bookkeeping. tensorboard_test.sh reads whole runs' files with TensorBoard.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tensorboard/event.pb.h"
#include "trainer/reporting/tensorboard/event_file.h"
#include "trainer/reporting/tensorboard/record_framing.h"
#include "trainer/reporting/tensorboard/scalar_writer.h"

namespace conveyor::tensorboard {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<std::vector<std::string>> FixtureLines() {
  const std::string path =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                   "/tests/trainer/fixtures/tensorboard_records.txt");
  std::ifstream f(path);
  EXPECT_TRUE(f) << path;
  std::vector<std::vector<std::string>> lines;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line[0] != '#') lines.push_back(absl::StrSplit(line, ' '));
  }
  return lines;
}

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

TEST(RecordFramingTest, MatchesTensorBoardsRecordWriter) {
  int records = 0;
  for (const std::vector<std::string>& f : FixtureLines()) {
    if (f[0] != "record") continue;
    const std::string payload = f[1] == "-" ? "" : absl::HexStringToBytes(f[1]);
    EXPECT_EQ(Hex(FrameRecord(payload)), f[2]) << "payload " << f[1];
    ++records;
  }
  EXPECT_EQ(records, 4);
}

TEST(EventProtoTest, SerialisesAsTensorBoardsEvent) {
  int events = 0;
  for (const std::vector<std::string>& f : FixtureLines()) {
    if (f[0] != "event") continue;
    Event event;
    double wall_time = 0, value = 0;
    int64_t step = 0;
    ASSERT_TRUE(absl::SimpleAtod(f[1], &wall_time));
    ASSERT_TRUE(absl::SimpleAtoi(f[2], &step));
    event.set_wall_time(wall_time);
    event.set_step(step);
    if (f[3] == "-") {
      event.set_file_version(f[4]);
    } else {
      ASSERT_TRUE(absl::SimpleAtod(f[4], &value));
      Summary::Value* v = event.mutable_summary()->add_value();
      v->set_tag(absl::StrReplaceAll(f[3], {{"_", " "}}));
      v->set_simple_value(static_cast<float>(value));
    }
    EXPECT_EQ(Hex(event.SerializeAsString()), f[5]) << "event at step " << f[2];
    ++events;
  }
  EXPECT_EQ(events, 4);
}

TEST(ScalarWriterTest, CountsWhatItCannotQueueAndClosesOnce) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/tb");
  absl::StatusOr<std::unique_ptr<ScalarWriter>> writer = ScalarWriter::Start(dir, 4);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_THAT((*writer)->path(), StartsWith(dir + "/events.out.tfevents."));
  (*writer)->Add("lm loss", 2.5, 1);
  ASSERT_TRUE((*writer)->Close().ok());
  (*writer)->Add("lm loss", 2.0, 2);  // after Close: dropped, never written
  EXPECT_EQ((*writer)->dropped(), 1);
  EXPECT_TRUE((*writer)->Close().ok());
  // The version record and one scalar: two framed events, nothing after Close.
  std::ifstream f((*writer)->path(), std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  EXPECT_THAT(bytes.str(), HasSubstr("brain.Event:2"));
  EXPECT_EQ(bytes.str().find("lm loss"), bytes.str().rfind("lm loss"));
}

TEST(EventFileTest, NamesTheFlagWhenTheFolderCannotBeMade) {
  const std::string file = absl::StrCat(std::getenv("TEST_TMPDIR"), "/a-file");
  std::ofstream(file) << "x";
  const absl::StatusOr<std::unique_ptr<EventFile>> made = EventFile::Create(file + "/tb");
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("--tensorboard-dir " + file + "/tb"));
}

}  // namespace
}  // namespace conveyor::tensorboard
