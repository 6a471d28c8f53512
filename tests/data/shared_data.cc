#include "tests/data/shared_data.h"

#include <sys/stat.h>

#include <climits>
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

std::string SharedDataDir() {
  // tools/test.sh passes the folder it found (CONVEYOR_SHARED_DIR), so a checkout
  // that does not sit beside ../shared still finds it.
  const std::string given = Env("CONVEYOR_SHARED_DIR");
  struct stat st;
  if (!given.empty() && ::stat((given + "/data").c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return given + "/data";
  }
  // Otherwise: the runfiles tree holds a symlink to the source file; its target is
  // <workspace>/tests/data/workspace_anchor.txt.
  const std::string anchor =
      Env("TEST_SRCDIR") + "/" + Env("TEST_WORKSPACE") + "/tests/data/workspace_anchor.txt";
  char resolved[PATH_MAX];
  if (::realpath(anchor.c_str(), resolved) == nullptr) {
    Die("cannot resolve " + anchor + " (run this test through bazel)");
  }
  std::string path = resolved;
  for (int i = 0; i < 3; ++i) path = path.substr(0, path.rfind('/'));
  const std::string shared = path + "/../shared/data";
  if (::stat(shared.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    Die("shared data folder not found at " + shared +
        ": the project expects ../shared beside the workspace (or CONVEYOR_SHARED_DIR "
        "naming it, as tools/test.sh sets)");
  }
  return shared;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

JsonValue ReadJsonOrDie(const std::string& path) {
  absl::StatusOr<JsonValue> v = ParseJson(ReadFileOrDie(path));
  if (!v.ok()) Die(path + ": " + std::string(v.status().message()));
  return *std::move(v);
}

void ExpectIndicesMatchFixture(const GptIndices& indices, const JsonValue& fixture) {
  const std::vector<int64_t> document_index(indices.document_index.begin(),
                                            indices.document_index.end());
  EXPECT_EQ(document_index, fixture["document_index"]["data"].IntArray());
  std::vector<int64_t> sample_index;
  for (const JsonValue& row : fixture["sample_index"]["data"].array()) {
    for (int64_t v : row.IntArray()) sample_index.push_back(v);
  }
  EXPECT_EQ(indices.sample_index, sample_index);
  EXPECT_EQ(indices.shuffle_index, fixture["shuffle_index"]["data"].IntArray());
}

}  // namespace conveyor::testing_util
