#include "parallel/directory_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/exit_code.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "gloo/common/error.h"

namespace conveyor {
namespace {

// Creates `path`, which must not exist yet, holding `contents`. O_EXCL: of two writers
// of one name, the second is refused (AlreadyExists) instead of both writing into one
// file. close() is checked too, as NFS may report a failed write-back (disk full, quota)
// only there. On failure nothing is left at `path`.
absl::Status WriteNewFile(const std::string& path, absl::string_view contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  absl::Status status = WriteAll(fd, contents, path);
  if (::close(fd) != 0 && status.ok()) {
    status = WriteErrnoToStatus(errno, absl::StrCat("cannot close ", path));
  }
  if (!status.ok()) ::unlink(path.c_str());
  return status;
}

// Writes <dir>/<name> so that a reader sees all of `contents` or no file. Not fsynced:
// rendezvous files matter only while their launch runs.
absl::Status WriteRendezvousFile(const std::string& dir, const std::string& name,
                                 absl::string_view contents) {
  return WriteFileAtomically(absl::StrCat(dir, "/", name), contents,
                             absl::StrCat(dir, "/", TemporaryFileName()), Durability::kVisible);
}

std::optional<std::string> ReadIfExists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::Status MakeDirectories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::ErrnoToStatus(error.value(), absl::StrCat("cannot create directory ", dir));
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

constexpr char kLaunchDir[] = "launch";   // the handshake's files, shared by a job's launches
constexpr char kJoinedDir[] = ".joined";  // in a launch's directory: one file per rank

// Where the launches of job `job_id` meet rank 0: "launch", or "launch.<job>" for a job
// its launcher names, so that two jobs sharing a run directory never meet.
std::string HandshakeDir(const std::string& run_dir, const std::string& job_id) {
  return job_id.empty() ? absl::StrCat(run_dir, "/", kLaunchDir)
                        : absl::StrCat(run_dir, "/", kLaunchDir, ".", EncodeFileName(job_id));
}

// What a rank writes to claim its place in a launch, and rank 0 reads: its world size,
// ended by a newline (a claim is created and then written, so it may be read short).
std::string ClaimContents(int world_size) { return absl::StrCat(world_size, "\n"); }
std::optional<int> ClaimedWorldSize(const std::string& claim) {
  const std::optional<std::string> contents = ReadIfExists(claim);
  int world_size = 0;
  if (!contents.has_value() || !absl::EndsWith(*contents, "\n") ||
      !absl::SimpleAtoi(absl::StripSuffix(*contents, "\n"), &world_size)) {
    return std::nullopt;
  }
  return world_size;
}

std::string JoinFile(int rank) { return absl::StrCat("join_", rank); }
std::string AckFile(int rank, const std::string& nonce) {
  return absl::StrCat("ack_", rank, "_", nonce);
}

// Called once every rank has confirmed its place in the launch, when nobody waits on a
// file of the handshake folder any more: what is left there (spent requests and answers;
// requests of killed launches, also of ranks beyond this world; answers to those;
// temporaries of writers killed mid-write) belongs to launches that are over, as one
// launch at a time uses a run directory. Clearing it keeps the folder from growing with
// every killed launch, and the next rank 0 from answering stale requests again.
void ClearHandshake(const std::string& handshake) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(handshake, error), end; !error && it != end;
       it.increment(error)) {
    ::unlink(it->path().c_str());  // best effort: a leftover costs one file
  }
}

// Global rank 0: names the launch, answers every join request until all have joined.
absl::StatusOr<std::string> LeadLaunch(const std::string& run_dir, int size,
                                       const std::string& job_id, absl::Duration timeout) {
  const std::string handshake = HandshakeDir(run_dir, job_id);
  const std::string launch = absl::StrFormat(
      "launch-%s-%d-%08x", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()),
      ::getpid(), RandomBits() & 0xffffffff);
  const std::string joined = absl::StrCat(run_dir, "/", launch, "/", kJoinedDir);
  RETURN_IF_ERROR(MakeDirectories(joined));
  RETURN_IF_ERROR(MakeDirectories(handshake));

  std::map<int, std::string> answered;  // rank -> the last nonce answered
  Poller poller(absl::ToChronoNanoseconds(timeout));
  while (true) {
    std::vector<int> missing;
    for (int r = 1; r < size; ++r) {
      if (const std::optional<int> world_size = ClaimedWorldSize(absl::StrCat(joined, "/", r));
          world_size.has_value()) {
        RETURN_IF_ERROR(CheckWorldSize(r, *world_size, size, "run directory " + run_dir));
        continue;
      }
      missing.push_back(r);
      const std::optional<std::string> nonce =
          ReadIfExists(absl::StrCat(handshake, "/", JoinFile(r)));
      if (!nonce.has_value() || nonce->empty() || answered[r] == *nonce) continue;
      // A request of a killed launch looks like one of a rank that started before this
      // one, and answering it costs one file (removed by ClearHandshake).
      const std::string ack = AckFile(r, EncodeFileName(*nonce));
      RETURN_IF_ERROR(WriteRendezvousFile(handshake, ack, absl::StrCat(launch, "\n", size)));
      answered[r] = *nonce;
    }
    if (missing.empty()) break;
    if (poller.Expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank(s) %s of %d never joined rank 0's launch within %s (each writes "
          "%s/join_<rank>); start every rank with the same run directory and world size %d, "
          "one launch at a time per run directory, and look for an earlier error from the "
          "missing ranks",
          absl::StrJoin(missing, ", "), size, absl::FormatDuration(timeout), handshake, size));
    }
    poller.Sleep();
  }
  ClearHandshake(handshake);
  return launch;
}

// Why a rank r > 0 cannot join: a second process claims its rank. `what` says how it
// showed.
absl::Status RankClaimedTwice(int rank, const std::string& what) {
  return absl::AlreadyExistsError(absl::StrFormat(
      "another process claimed rank %d (%s): start each rank once, and one launch at a time "
      "per run directory",
      rank, what));
}

// Whether this process's join request (holding `nonce`) was replaced or removed: only
// another process claiming the same rank does either before this one is admitted (the
// other's request overwrites it, or the other, admitted, removes it; or its rank 0,
// done, clears the handshake folder).
bool RequestWithdrawn(const std::string& request, const std::string& nonce) {
  const std::optional<std::string> holds = ReadIfExists(request);
  return holds.has_value() ? *holds != nonce : !PathExists(request);
}

// Global rank r > 0: asks to join, waits for this launch's rank 0 to answer with its
// name, then claims its place there.
absl::StatusOr<std::string> JoinLaunch(const std::string& run_dir, int rank, int size,
                                       const std::string& job_id, absl::Duration timeout) {
  const std::string handshake = HandshakeDir(run_dir, job_id);
  RETURN_IF_ERROR(MakeDirectories(handshake));
  const std::string nonce = absl::StrFormat("%d-%016x", ::getpid(), RandomBits());
  RETURN_IF_ERROR(WriteRendezvousFile(handshake, JoinFile(rank), nonce));
  const std::string request = absl::StrCat(handshake, "/", JoinFile(rank));
  const std::string ack_path = absl::StrCat(handshake, "/", AckFile(rank, EncodeFileName(nonce)));
  Poller poller(absl::ToChronoNanoseconds(timeout));
  std::optional<std::string> ack;
  while (!(ack = ReadIfExists(ack_path)).has_value() || ack->empty()) {
    if (RequestWithdrawn(request, nonce)) {
      return RankClaimedTwice(
          rank, absl::StrFormat("this process's request %s was replaced or removed", request));
    }
    if (poller.Expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank 0 never admitted rank %d of %d to a launch within %s (it answers %s/%s); "
          "start rank 0 with the same run directory, or look for its error if it failed; "
          "if its launch went on without this process, another process may have claimed "
          "rank %d: start each rank once, and one launch at a time per run directory; rank 0 "
          "answers only the ranks below its WORLD_SIZE: start every rank with WORLD_SIZE %d",
          rank, size, absl::FormatDuration(timeout), handshake, JoinFile(rank), rank, size));
    }
    poller.Sleep();
  }
  // The answer holds the launch's name and global rank 0's world size.
  const std::pair<std::string, std::string> answer = absl::StrSplit(*ack, absl::MaxSplits('\n', 1));
  const std::string& launch = answer.first;
  int rank0_size = 0;
  if (launch.empty() || launch.find('/') != std::string::npos || launch.front() == '.' ||
      !absl::SimpleAtoi(answer.second, &rank0_size)) {
    return absl::InternalError(
        absl::StrFormat("rank %d: %s names no launch: \"%s\"", rank, ack_path, *ack));
  }
  const std::string joined = absl::StrCat(run_dir, "/", launch, "/", kJoinedDir);
  RETURN_IF_ERROR(MakeDirectories(joined));
  // Exclusive: should rank 0 have answered two processes claiming this rank, the second
  // to confirm is refused here. The claim holds this rank's world size, which rank 0
  // compares with its own, as this rank does below: whichever differs, both fail.
  const std::string claim = absl::StrCat(joined, "/", rank);
  if (absl::Status s = WriteNewFile(claim, ClaimContents(size)); absl::IsAlreadyExists(s)) {
    return RankClaimedTwice(rank,
                            absl::StrFormat("it joined launch %s first: %s exists", launch, claim));
  } else if (!s.ok()) {
    return s;
  }
  // Admitted: the request and its answer are spent. The request is left when it is
  // another process's by now: that one fails, seeing it removed by rank 0 instead.
  ::unlink(ack_path.c_str());
  if (!RequestWithdrawn(request, nonce)) ::unlink(request.c_str());
  RETURN_IF_ERROR(CheckWorldSize(rank, size, rank0_size, "run directory " + run_dir));
  return launch;
}

// Retries removal for this long: on NFS, a file still open on this client (a board of a
// rank of this node that has not closed it yet) is renamed to .nfsXXXX instead of
// removed, and goes once it is closed.
constexpr std::chrono::seconds kRemovalPatience(1);

}  // namespace

std::string TemporaryFileName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::strcpy(host, "unknown-host");
  }
  return absl::StrFormat(".tmp.%s.%d.%016x", EncodeFileName(host), ::getpid(), RandomBits());
}

absl::Status RemoveRendezvousDirectory(const std::string& dir) {
  Poller poller(kRemovalPatience);
  std::error_code error;
  while (true) {
    std::filesystem::remove_all(dir, error);
    if (!error || poller.Expired()) break;
    poller.Sleep();
  }
  if (error) {
    return absl::ErrnoToStatus(error.value(),
                               absl::StrCat("cannot remove the rendezvous directory ", dir));
  }
  return absl::OkStatus();
}

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
  RETURN_IF_ERROR(MakeDirectories(dir)) << "rendezvous store";
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(dir, timeout));
}

DirectoryStore::DirectoryStore(std::string dir, std::chrono::milliseconds timeout)
    : RendezvousStore("rendezvous store " + dir, timeout), dir_(std::move(dir)) {}

std::string DirectoryStore::PathOf(const std::string& key) const {
  return absl::StrCat(dir_, "/", EncodeFileName(key));
}

bool DirectoryStore::Has(const std::string& key) const { return PathExists(PathOf(key)); }

void DirectoryStore::set(const std::string& key, const std::vector<char>& data) {
  // Write then rename, so a reader never sees a half-written value. Temporary names
  // start with '.', which EncodeFileName never produces for a key.
  const absl::Status s =
      WriteRendezvousFile(dir_, EncodeFileName(key), absl::string_view(data.data(), data.size()));
  if (!s.ok()) {
    throw gloo::IoException(
        absl::StrFormat("rendezvous store %s: cannot set key \"%s\": %s", dir_, key, s.message()));
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
  ASSIGN_OR_RETURN(std::unique_ptr<DirectoryStore> store,
                   DirectoryStore::Open(GroupDir(name), WholeMilliseconds(timeout)));
  return std::unique_ptr<RendezvousStore>(std::move(store));
}

absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> DirectoryRendezvous::Join(
    const std::string& run_dir, int rank, int size, const std::string& job_id,
    absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rendezvous in %s: rank %d is not in [0, %d)", run_dir, rank, size));
  }
  ASSIGN_OR_RETURN(std::string launch, rank == 0
                                           ? LeadLaunch(run_dir, size, job_id, timeout)
                                           : JoinLaunch(run_dir, rank, size, job_id, timeout));
  return std::make_unique<DirectoryRendezvous>(absl::StrCat(run_dir, "/", launch));
}

absl::StatusOr<std::unique_ptr<ProgressBoard>> DirectoryRendezvous::OpenBoard(
    const std::string& name, int rank, int size) const {
  // EncodeFileName never starts a key's file with '.', so this cannot clash with a key.
  RETURN_IF_ERROR(MakeDirectories(GroupDir(name))) << "progress board";
  return FileProgressBoard::Open(GroupDir(name) + "/.progress", rank, size);
}

}  // namespace conveyor
