#include "tests/data/shared_data.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace conveyor::testing_util {
namespace {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "FATAL: %s\n", msg.c_str());
  std::abort();
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

std::string TestDataDir() {
  // The fixtures are the data of this library (//tests/testdata), so Bazel places
  // them in every dependent test's runfiles tree.
  const std::string dir = Env("TEST_SRCDIR") + "/" + Env("TEST_WORKSPACE") + "/tests/testdata";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    Die("test fixtures not found at " + dir + " (run this test through bazel)");
  }
  return dir;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json ReadJsonOrDie(const std::string& path) {
  absl::StatusOr<Json> v = ParseJson(ReadFileOrDie(path));
  if (!v.ok()) Die(path + ": " + std::string(v.status().message()));
  return *std::move(v);
}

void ExpectIndicesMatchFixture(const GptIndices& indices, const Json& fixture) {
  const std::vector<int64_t> document_index(indices.document_index.begin(),
                                            indices.document_index.end());
  EXPECT_EQ(document_index, fixture["document_index"]["data"].get<std::vector<int64_t>>());
  std::vector<int64_t> sample_index;
  for (const Json& row : fixture["sample_index"]["data"]) {
    for (int64_t v : row.get<std::vector<int64_t>>()) sample_index.push_back(v);
  }
  EXPECT_EQ(indices.sample_index, sample_index);
  EXPECT_EQ(indices.shuffle_index, fixture["shuffle_index"]["data"].get<std::vector<int64_t>>());
}

}  // namespace conveyor::testing_util
