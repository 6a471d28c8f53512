#include "parallel/tcp_rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "gloo/common/error.h"

namespace conveyor {
namespace {

// Whether getaddrinfo's `error` is final: the name does not exist (the DNS answered so,
// or /etc/hosts and the DNS know no such host) or cannot be looked up at all. A name
// server that did not answer (EAI_AGAIN) or a system error may pass: those are retried.
bool ResolutionFailedForGood(int error) {
  switch (error) {
    case EAI_NONAME:
    case EAI_FAIL:
    case EAI_SERVICE:
    case EAI_FAMILY:
    case EAI_SOCKTYPE:
    case EAI_BADFLAGS:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
#endif
      return true;
    default:
      return false;
  }
}

// One attempt to connect to host:port before `deadline`; -1 with `error` set on failure,
// and `*final` set when retrying cannot help (the name does not resolve, for good).
// The socket is non-blocking: every wait on it is bounded by a deadline (tcp_store_wire.h).
int ConnectOnce(const std::string& host, int port, absl::Time deadline, std::string* error,
                bool* final) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    *error = absl::StrCat("cannot resolve MASTER_ADDR \"", host, "\": ",
                          resolved == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(resolved));
    *final = ResolutionFailedForGood(resolved);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int failure = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (failure == EINPROGRESS) {
      socklen_t length = sizeof(failure);
      if (!tcp_store::WaitReady(fd, POLLOUT, deadline)) {
        failure = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length) != 0) {
        failure = errno;
      }
    }
    if (failure != 0) {
      *error = std::strerror(failure);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  }
  return fd;
}

// What to do when another program holds the store's port.
constexpr char kForeignPortFix[] =
    "another program listens there: set MASTER_ADDR to global rank 0's host and MASTER_PORT to "
    "a port no other program uses (under torchrun, whose own store holds MASTER_PORT, set "
    "CONVEYOR_STORE_PORT to another free port)";

// The store's verdict on this process, which it gives once the job has assembled (or
// cannot): admitted, or refused with the reason (another process holds this rank, rank
// 0 gave up waiting for the missing ranks).
absl::Status AwaitVerdict(int fd, const std::string& address, const tcp_store::Membership& self,
                          absl::Time deadline, absl::Duration timeout) {
  std::string verdict;
  if (!tcp_store::ReadBlob(fd, &verdict, deadline)) {
    if (absl::Now() < deadline) {
      return absl::UnavailableError(absl::StrFormat(
          "the TCP store at MASTER_ADDR:MASTER_PORT = %s closed the connection before admitting "
          "this process (global rank %d): global rank 0 ended; look for its error",
          address, self.rank));
    }
    return absl::DeadlineExceededError(absl::StrFormat(
        "the TCP store at MASTER_ADDR:MASTER_PORT = %s did not admit this process (global rank "
        "%d) within %s: not every rank of the job (WORLD_SIZE %d) reached it; global rank 0 "
        "names the missing ones",
        address, self.rank, absl::FormatDuration(timeout), self.world_size));
  }
  if (verdict.empty()) return absl::OkStatus();
  const absl::Status refusal = tcp_store::DecodeVerdict(verdict);
  return absl::Status(refusal.code(),
                      absl::StrFormat("the TCP store at MASTER_ADDR:MASTER_PORT = %s refused this "
                                      "process (global rank %d): %s",
                                      address, self.rank, refusal.message()));
}

// The client's side of the handshake on a fresh connection to `address`: says who it
// is, then reads the store's answer byte by byte, so that another program's answer is
// recognised at its first byte. Global rank 0's membership must match `self`'s.
absl::Status Handshake(int fd, const std::string& address, const tcp_store::Membership& self,
                       absl::Time deadline, absl::Duration timeout) {
  auto no_answer = [&]() {
    if (absl::Now() < deadline) {
      return absl::UnavailableError(absl::StrFormat(
          "the program at MASTER_ADDR:MASTER_PORT = %s accepted the connection, then closed it "
          "without answering the TCP store's handshake: it is not a Conveyor store (or one of "
          "another version); %s",
          address, kForeignPortFix));
    }
    return absl::DeadlineExceededError(absl::StrFormat(
        "the program at MASTER_ADDR:MASTER_PORT = %s accepted the connection but did not answer "
        "the TCP store's handshake within %s: it is not a Conveyor store, or global rank 0 "
        "hangs; %s",
        address, absl::FormatDuration(timeout), kForeignPortFix));
  };
  if (!tcp_store::WriteAll(fd, tcp_store::kHello.data(), tcp_store::kHello.size(), deadline) ||
      !tcp_store::WriteMembership(fd, self, deadline)) {
    return no_answer();
  }
  std::string answer;
  for (const char expected : tcp_store::kWelcome) {
    char c = 0;
    if (!tcp_store::ReadAll(fd, &c, 1, deadline)) return no_answer();
    answer.push_back(c);
    if (c == expected) continue;
    char more[64];  // whatever else has come, for the message
    const ssize_t n = ::recv(fd, more, sizeof(more), MSG_DONTWAIT);
    if (n > 0) answer.append(more, static_cast<size_t>(n));
    return absl::FailedPreconditionError(absl::StrFormat(
        "the program at MASTER_ADDR:MASTER_PORT = %s answered the TCP store's handshake with "
        "\"%s\": it is not a Conveyor store; %s",
        address, absl::CHexEscape(answer), kForeignPortFix));
  }
  tcp_store::Membership rank0;
  if (!tcp_store::ReadMembership(fd, &rank0, deadline)) return no_answer();
  if (rank0.job_id != self.job_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the TCP store at MASTER_ADDR:MASTER_PORT = %s serves another job: its global rank 0 "
        "belongs to job %s, this process (global rank %d) to job %s; give each job a port of "
        "its own (MASTER_PORT, or CONVEYOR_STORE_PORT)",
        address, tcp_store::DescribeJob(rank0.job_id), self.rank,
        tcp_store::DescribeJob(self.job_id)));
  }
  RETURN_IF_ERROR(
      CheckWorldSize(self.rank, self.world_size, rank0.world_size, "TCP store " + address));
  return AwaitVerdict(fd, address, self, deadline, timeout);
}

// A group's keys, under "<group>/" in the one store.
class TcpStore : public RendezvousStore {
 public:
  TcpStore(std::shared_ptr<TcpStoreClient> client, const std::string& group,
           std::chrono::milliseconds timeout)
      : RendezvousStore(absl::StrCat("rendezvous store ", client->address(), " (", group, ")"),
                        timeout),
        client_(std::move(client)),
        prefix_(group + "/") {}

  void set(const std::string& key, const std::vector<char>& data) override {
    const absl::Status s = client_->Set(prefix_ + key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }

  bool Has(const std::string& key) const override {
    // A store that did not answer never will (the connection is out of step, or rank 0
    // is gone): waiting out the timeout for it would only delay the error.
    absl::StatusOr<std::optional<std::string>> value = client_->Get(prefix_ + key);
    if (!value.ok()) throw gloo::IoException(std::string(value.status().message()));
    return value->has_value();
  }

 protected:
  std::vector<char> Read(const std::string& key) override {
    absl::StatusOr<std::optional<std::string>> value = client_->Get(prefix_ + key);
    if (!value.ok()) throw gloo::IoException(std::string(value.status().message()));
    if (!value->has_value()) {
      throw gloo::IoException(absl::StrCat(where(), ": key \"", key, "\" vanished"));
    }
    return std::vector<char>((*value)->begin(), (*value)->end());
  }

 private:
  std::shared_ptr<TcpStoreClient> client_;
  std::string prefix_;
};

// Each rank's latest post under "<group>/.progress/<rank>", as "<seq> <activity>".
class StoreProgressBoard : public ProgressBoard {
 public:
  StoreProgressBoard(std::shared_ptr<TcpStoreClient> client, const std::string& group, int rank,
                     int size)
      : client_(std::move(client)), prefix_(group + "/.progress/"), rank_(rank), size_(size) {}

  void Post(int64_t seq, absl::string_view activity) override {
    client_->Post(absl::StrCat(prefix_, rank_), absl::StrCat(seq, " ", activity));
  }

  std::vector<Entry> Read() const override {
    // Read after a failure only: a store that answers does so in milliseconds, and one
    // behind a lost link must not hold the failing rank a whole timeout longer.
    constexpr absl::Duration kReadLimit = absl::Seconds(5);
    std::vector<Entry> entries(size_);
    for (int r = 0; r < size_; ++r) {
      absl::StatusOr<std::optional<std::string>> post =
          client_->Get(absl::StrCat(prefix_, r), kReadLimit);
      if (!post.ok()) {
        // The connection is out of step now: nothing more can be read.
        for (int rest = r; rest < size_; ++rest) entries[rest].unknown = true;
        break;
      }
      if (!post->has_value()) continue;
      const std::string& text = **post;
      const size_t space = text.find(' ');
      int64_t seq = -1;
      if (space == std::string::npos || !absl::SimpleAtoi(text.substr(0, space), &seq)) continue;
      entries[r] = {seq, text.substr(space + 1)};
    }
    return entries;
  }

 private:
  std::shared_ptr<TcpStoreClient> client_;
  std::string prefix_;
  int rank_;
  int size_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, const tcp_store::Membership& self, absl::Duration timeout) {
  const std::string address = absl::StrCat(host, ":", port);
  const absl::Time deadline = absl::Now() + timeout;
  std::string error;
  while (true) {
    bool final = false;
    const int fd = ConnectOnce(host, port, deadline, &error, &final);
    if (final) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s; name resolution failed for good, so waiting for global rank 0 cannot help: set "
          "MASTER_ADDR to global rank 0's host name or IP address as this node resolves it "
          "(check the spelling; `getent hosts %s` shows what this node's /etc/hosts and DNS "
          "say)",
          error, host));
    }
    if (fd >= 0) {
      if (absl::Status s = Handshake(fd, address, self, deadline, timeout); !s.ok()) {
        ::close(fd);
        return s;
      }
      return std::shared_ptr<TcpStoreClient>(new TcpStoreClient(fd, address, timeout));
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(std::min(absl::Milliseconds(100), deadline - absl::Now()));
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "cannot reach the TCP store at MASTER_ADDR:MASTER_PORT = %s within %s (%s): global rank 0 "
      "serves it; check that rank 0 started, that the address is rank 0's host as the other "
      "nodes see it, and that the port is open between the nodes",
      address, absl::FormatDuration(timeout), error));
}

TcpStoreClient::~TcpStoreClient() { ::close(fd_); }

absl::Status TcpStoreClient::Lost(const char* op, const std::string& key, absl::Duration waited) {
  failure_ = absl::UnavailableError(absl::StrFormat(
      "TCP store %s: no answer within %s or lost the connection during %s of key \"%s\" (did "
      "global rank 0 exit?)",
      address_, absl::FormatDuration(waited), op, key));
  return failure_;
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(failure_);
  const absl::Time deadline = absl::Now() + io_timeout_;
  const tcp_store::Op op = tcp_store::Op::kSet;
  uint8_t stored = 0;
  if (!tcp_store::WriteAll(fd_, &op, sizeof(op), deadline) ||
      !tcp_store::WriteBlob(fd_, key, deadline) || !tcp_store::WriteBlob(fd_, value, deadline) ||
      !tcp_store::ReadAll(fd_, &stored, 1, deadline)) {
    return Lost("set", key, io_timeout_);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> TcpStoreClient::Get(const std::string& key,
                                                               absl::Duration limit) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(failure_);
  const absl::Duration wait = std::min(io_timeout_, limit);
  const absl::Time deadline = absl::Now() + wait;
  const tcp_store::Op op = tcp_store::Op::kGet;
  uint8_t found = 0;
  if (!tcp_store::WriteAll(fd_, &op, sizeof(op), deadline) ||
      !tcp_store::WriteBlob(fd_, key, deadline) || !tcp_store::WriteBlob(fd_, "", deadline) ||
      !tcp_store::ReadAll(fd_, &found, 1, deadline)) {
    return Lost("get", key, wait);
  }
  if (found == 0) return std::optional<std::string>();
  std::string value;
  if (!tcp_store::ReadBlob(fd_, &value, deadline)) return Lost("get", key, wait);
  return std::optional<std::string>(std::move(value));
}

void TcpStoreClient::Post(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.ok()) return;
  const absl::Time deadline = absl::Now() + io_timeout_;
  const tcp_store::Op op = tcp_store::Op::kPost;
  // Diagnostics only: the failure Lost records surfaces at the next Set or Get.
  if (!tcp_store::WriteAll(fd_, &op, sizeof(op), deadline) ||
      !tcp_store::WriteBlob(fd_, key, deadline) || !tcp_store::WriteBlob(fd_, value, deadline)) {
    Lost("post", key, io_timeout_).IgnoreError();
  }
}

absl::StatusOr<std::unique_ptr<RendezvousStore>> TcpRendezvous::OpenStore(
    const std::string& name, absl::Duration timeout) const {
  return std::unique_ptr<RendezvousStore>(
      std::make_unique<TcpStore>(client_, name, WholeMilliseconds(timeout)));
}

absl::StatusOr<std::unique_ptr<ProgressBoard>> TcpRendezvous::OpenBoard(const std::string& name,
                                                                        int rank, int size) const {
  return std::unique_ptr<ProgressBoard>(
      std::make_unique<StoreProgressBoard>(client_, name, rank, size));
}

}  // namespace conveyor
