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
#include <thread>

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

std::vector<char> DirectoryStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::ifstream in(PathOf(key), std::ios::binary);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    throw gloo::IoException(
        absl::StrFormat("rendezvous store %s: cannot read key \"%s\"", dir_, key));
  }
  return data;
}

void DirectoryStore::wait(const std::vector<std::string>& keys,
                          const std::chrono::milliseconds& timeout) {
  // Polls rather than inotify, which shared file systems (NFS) do not support. The
  // interval grows from 1 ms so that rendezvous of a small group on one node is quick.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto interval = std::chrono::milliseconds(1);
  while (true) {
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (!Has(key)) missing.push_back(key);
    }
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw gloo::IoException(
          absl::StrFormat("rendezvous store %s: timed out after %d ms waiting for key(s) %s", dir_,
                          timeout.count(), absl::StrJoin(missing, ", ")));
    }
    std::this_thread::sleep_for(interval);
    interval = std::min(interval * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace conveyor
