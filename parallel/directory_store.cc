#include "parallel/directory_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"

namespace conveyor {

std::string EncodeFileName(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // Brackets and commas are legal in file names and keep "tp[0,1]" readable.
    const bool plain =
        std::isalnum(c) || (c != 0 && std::strchr("_-[],", c) != nullptr) || (c == '.' && i > 0);
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<DirectoryStore>> DirectoryStore::Open(
    const std::string& dir, std::chrono::milliseconds timeout) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrFormat("rendezvous store: cannot create directory %s: %s", dir, error.message()));
  }
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(dir, timeout));
}

DirectoryStore::DirectoryStore(std::string dir, std::chrono::milliseconds timeout)
    : RendezvousStore("rendezvous store " + dir, timeout), dir_(std::move(dir)) {}

std::string DirectoryStore::PathOf(const std::string& key) const {
  return absl::StrCat(dir_, "/", EncodeFileName(key));
}

bool DirectoryStore::Has(const std::string& key) const {
  struct stat info;
  return ::stat(PathOf(key).c_str(), &info) == 0;
}

void DirectoryStore::set(const std::string& key, const std::vector<char>& data) {
  // Write then rename, so a reader never sees a half-written value. The temporary
  // name starts with '.', which EncodeFileName never produces for a key.
  static std::atomic<int> counter{0};
  const std::string tmp = absl::StrFormat("%s/.tmp.%d.%d", dir_, ::getpid(), counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out.good()) {
      throw gloo::IoException(
          absl::StrFormat("rendezvous store %s: cannot write key \"%s\" (%s)", dir_, key, tmp));
    }
  }
  if (::rename(tmp.c_str(), PathOf(key).c_str()) != 0) {
    throw gloo::IoException(absl::StrFormat("rendezvous store %s: cannot set key \"%s\": %s", dir_,
                                            key, std::strerror(errno)));
  }
}

std::vector<char> DirectoryStore::Read(const std::string& key) {
  std::ifstream in(PathOf(key), std::ios::binary);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    throw gloo::IoException(
        absl::StrFormat("rendezvous store %s: cannot read key \"%s\"", dir_, key));
  }
  return data;
}

std::string DirectoryRendezvous::GroupDir(const std::string& name) const {
  return absl::StrCat(dir_, "/", EncodeFileName(name));
}

absl::StatusOr<std::unique_ptr<RendezvousStore>> DirectoryRendezvous::OpenStore(
    const std::string& name, absl::Duration timeout) const {
  absl::StatusOr<std::unique_ptr<DirectoryStore>> store =
      DirectoryStore::Open(GroupDir(name), WholeMilliseconds(timeout));
  if (!store.ok()) return store.status();
  return std::unique_ptr<RendezvousStore>(*std::move(store));
}

absl::StatusOr<std::unique_ptr<ProgressBoard>> DirectoryRendezvous::OpenBoard(
    const std::string& name, int rank, int size) const {
  // EncodeFileName never starts a key's file with '.', so this cannot clash with a key.
  std::error_code ignored;  // a directory that cannot be made fails the open, with its path
  std::filesystem::create_directories(GroupDir(name), ignored);
  return FileProgressBoard::Open(GroupDir(name) + "/.progress", rank, size);
}

}  // namespace conveyor
