#include "trainer/checkpoint/format.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {

std::string IterationDirName(int64_t iteration) { return absl::StrFormat("iter_%07d", iteration); }

bool ParseIterationDirName(const std::string& name, int64_t* iteration) {
  int64_t parsed;
  if (!absl::StartsWith(name, "iter_") || name.size() <= 5 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos ||
      !absl::SimpleAtoi(name.substr(5), &parsed)) {
    return false;
  }
  if (iteration != nullptr) *iteration = parsed;
  return true;
}

std::string TempDirName(int64_t iteration, const std::string& nonce) {
  return absl::StrCat(IterationDirName(iteration), ".tmp-", nonce);
}

std::string DataFileName(int rank) { return absl::StrFormat("rank_%05d.bin", rank); }

std::string FragmentFileName(int rank) { return absl::StrFormat("rank_%05d.fragment", rank); }

absl::StatusOr<int64_t> ReadLatestIteration(const std::string& dir) {
  const std::string path = JoinPath(dir, kLatestFileName);
  absl::StatusOr<std::string> contents = ReadSmallFile(path);
  if (absl::IsNotFound(contents.status())) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint in ", dir, ": ", path, " does not exist"));
  }
  if (!contents.ok()) return contents.status();
  const absl::string_view text = absl::StripAsciiWhitespace(*contents);
  int64_t iteration;
  if (!absl::SimpleAtoi(text, &iteration) || iteration < 0) {
    return absl::DataLossError(absl::StrCat(path, " should hold an iteration number but holds \"",
                                            absl::CHexEscape(text.substr(0, 64)), "\""));
  }
  return iteration;
}

absl::Status WriteLatestIteration(const std::string& dir, int64_t iteration,
                                  const std::string& nonce) {
  const std::string path = JoinPath(dir, kLatestFileName);
  return WriteFileAtomically(path, absl::StrCat(iteration, "\n"),
                             absl::StrCat(path, ".tmp-", nonce), Durability::kDurable);
}

}  // namespace conveyor
