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
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gloo/common/error.h"

namespace conveyor {
namespace {

// Writes through a temporary name and a rename, so that a reader sees all of `contents`
// or no file. Temporary names start with '.', which no handshake file does.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             const std::string& contents) {
  static std::atomic<int> counter{0};
  const std::string tmp = absl::StrFormat("%s/.tmp.%d.%d", dir, ::getpid(), counter.fetch_add(1));
  const std::string path = absl::StrCat(dir, "/", name);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << contents;
    if (!out.good()) {
      return absl::UnavailableError(absl::StrFormat("cannot write %s", tmp));
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrFormat("cannot create %s: %s", path, std::strerror(error)));
  }
  return absl::OkStatus();
}

std::optional<std::string> ReadIfExists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

absl::Status MakeDirectories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrFormat("cannot create directory %s: %s", dir, error.message()));
  }
  return absl::OkStatus();
}

uint64_t RandomBits() {
  std::random_device device;
  std::seed_seq seed{device(), device(), static_cast<unsigned>(::getpid()),
                     static_cast<unsigned>(absl::GetCurrentTimeNanos())};
  std::mt19937_64 engine(seed);
  return engine();
}

// Polls like RendezvousStore::wait: from 1 ms to 20 ms, as shared file systems have no
// change notification.
class Poll {
 public:
  explicit Poll(absl::Duration timeout) : deadline_(absl::Now() + timeout) {}
  bool Expired() const { return absl::Now() >= deadline_; }
  void Sleep() {
    std::this_thread::sleep_for(interval_);
    interval_ = std::min(interval_ * 2, std::chrono::milliseconds(20));
  }

 private:
  absl::Time deadline_;
  std::chrono::milliseconds interval_{1};
};

constexpr char kLaunchDir[] = "launch";   // the handshake's files, shared by all launches
constexpr char kJoinedDir[] = ".joined";  // in a launch's directory: one file per rank

std::string JoinFile(int rank) { return absl::StrCat("join_", rank); }
std::string AckFile(int rank, const std::string& nonce) {
  return absl::StrCat("ack_", rank, "_", nonce);
}

// Global rank 0: names the launch, answers every join request until all have joined.
absl::StatusOr<std::string> LeadLaunch(const std::string& run_dir, int size,
                                       absl::Duration timeout) {
  const std::string handshake = absl::StrCat(run_dir, "/", kLaunchDir);
  const std::string launch = absl::StrFormat(
      "launch-%s-%d-%08x", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()),
      ::getpid(), RandomBits() & 0xffffffff);
  const std::string joined = absl::StrCat(run_dir, "/", launch, "/", kJoinedDir);
  if (absl::Status s = MakeDirectories(joined); !s.ok()) return s;
  if (absl::Status s = MakeDirectories(handshake); !s.ok()) return s;

  std::map<int, std::string> answered;  // rank -> the last nonce answered
  std::set<std::string> acks;           // ack files written, removed at the end
  Poll poll(timeout);
  while (true) {
    std::vector<int> missing;
    for (int r = 1; r < size; ++r) {
      if (Exists(absl::StrCat(joined, "/", r))) continue;
      missing.push_back(r);
      const std::optional<std::string> nonce =
          ReadIfExists(absl::StrCat(handshake, "/", JoinFile(r)));
      if (!nonce.has_value() || nonce->empty() || answered[r] == *nonce) continue;
      // Perhaps a request a killed launch left: answering it costs one file.
      const std::string ack = AckFile(r, EncodeFileName(*nonce));
      if (absl::Status s = WriteAtomically(handshake, ack, launch); !s.ok()) return s;
      answered[r] = *nonce;
      acks.insert(ack);
    }
    if (missing.empty()) break;
    if (poll.Expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank(s) %s of %d never joined rank 0's launch within %s (each writes "
          "%s/join_<rank>); start every rank with the same run directory and world size %d, "
          "and look for an earlier error from the missing ranks",
          absl::StrJoin(missing, ", "), size, absl::FormatDuration(timeout), handshake, size));
    }
    poll.Sleep();
  }
  for (const std::string& ack : acks) ::unlink(absl::StrCat(handshake, "/", ack).c_str());
  return launch;
}

// Global rank r > 0: asks to join, waits for this launch's rank 0 to answer with its
// name, then confirms.
absl::StatusOr<std::string> JoinLaunch(const std::string& run_dir, int rank, int size,
                                       absl::Duration timeout) {
  const std::string handshake = absl::StrCat(run_dir, "/", kLaunchDir);
  if (absl::Status s = MakeDirectories(handshake); !s.ok()) return s;
  const std::string nonce = absl::StrFormat("%d-%016x", ::getpid(), RandomBits());
  if (absl::Status s = WriteAtomically(handshake, JoinFile(rank), nonce); !s.ok()) return s;
  const std::string ack_path = absl::StrCat(handshake, "/", AckFile(rank, EncodeFileName(nonce)));
  Poll poll(timeout);
  std::optional<std::string> launch;
  while (!(launch = ReadIfExists(ack_path)).has_value() || launch->empty()) {
    if (poll.Expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank 0 never admitted rank %d of %d to a launch within %s (it answers %s/%s); "
          "start rank 0 with the same run directory, or look for its error if it failed",
          rank, size, absl::FormatDuration(timeout), handshake, JoinFile(rank)));
    }
    poll.Sleep();
  }
  if (launch->find('/') != std::string::npos || launch->front() == '.') {
    return absl::InternalError(
        absl::StrFormat("rank %d: %s names no launch: \"%s\"", rank, ack_path, *launch));
  }
  const std::string joined = absl::StrCat(run_dir, "/", *launch, "/", kJoinedDir);
  if (absl::Status s = MakeDirectories(joined); !s.ok()) return s;
  if (absl::Status s = WriteAtomically(joined, absl::StrCat(rank), nonce); !s.ok()) return s;
  // Answered and confirmed: the request is spent (rank 0 removes the answer too).
  ::unlink(ack_path.c_str());
  ::unlink(absl::StrCat(handshake, "/", JoinFile(rank)).c_str());
  return *launch;
}

}  // namespace

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

absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> DirectoryRendezvous::Join(
    const std::string& run_dir, int rank, int size, absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rendezvous in %s: rank %d is not in [0, %d)", run_dir, rank, size));
  }
  absl::StatusOr<std::string> launch =
      rank == 0 ? LeadLaunch(run_dir, size, timeout) : JoinLaunch(run_dir, rank, size, timeout);
  if (!launch.ok()) return launch.status();
  return std::make_unique<DirectoryRendezvous>(absl::StrCat(run_dir, "/", *launch));
}

absl::Status DirectoryRendezvous::RemoveAll() const {
  std::error_code error;
  std::filesystem::remove_all(dir_, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrFormat("cannot remove the rendezvous directory %s: %s", dir_, error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProgressBoard>> DirectoryRendezvous::OpenBoard(
    const std::string& name, int rank, int size) const {
  // EncodeFileName never starts a key's file with '.', so this cannot clash with a key.
  std::error_code ignored;  // a directory that cannot be made fails the open, with its path
  std::filesystem::create_directories(GroupDir(name), ignored);
  return FileProgressBoard::Open(GroupDir(name) + "/.progress", rank, size);
}

}  // namespace conveyor
