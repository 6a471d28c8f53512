#include "parallel/tcp_rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gloo/common/error.h"
#include "parallel/tcp_store_wire.h"

namespace conveyor {
namespace {

// One attempt to connect to host:port; -1 with `error` set on failure. Reads and writes
// on the socket give up after `io_timeout`, so a store that stops answering ends in an
// error, not a hang.
int ConnectOnce(const std::string& host, int port, absl::Duration io_timeout, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    *error = absl::StrCat("cannot resolve MASTER_ADDR \"", host, "\": ", gai_strerror(resolved));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      *error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    const timeval limit = absl::ToTimeval(io_timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  }
  return fd;
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
    absl::StatusOr<std::optional<std::string>> value = client_->Get(prefix_ + key);
    return value.ok() && value->has_value();
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
    std::vector<Entry> entries(size_);
    for (int r = 0; r < size_; ++r) {
      absl::StatusOr<std::optional<std::string>> post = client_->Get(absl::StrCat(prefix_, r));
      if (!post.ok() || !post->has_value()) continue;
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

absl::StatusOr<std::shared_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host,
                                                                        int port,
                                                                        absl::Duration timeout) {
  const std::string address = absl::StrCat(host, ":", port);
  const absl::Time deadline = absl::Now() + timeout;
  std::string error;
  while (true) {
    const int fd = ConnectOnce(host, port, timeout, &error);
    if (fd >= 0) return std::shared_ptr<TcpStoreClient>(new TcpStoreClient(fd, address, timeout));
    if (absl::Now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "cannot reach the TCP store at MASTER_ADDR:MASTER_PORT = %s within %s (%s): global rank 0 "
      "serves it; check that rank 0 started, that the address is rank 0's host as the other "
      "nodes see it, and that the port is open between the nodes",
      address, absl::FormatDuration(timeout), error));
}

TcpStoreClient::~TcpStoreClient() { ::close(fd_); }

absl::Status TcpStoreClient::Lost(const char* op, const std::string& key) const {
  return absl::UnavailableError(absl::StrFormat(
      "TCP store %s: no answer within %s or lost the connection during %s of key \"%s\" (did "
      "global rank 0 exit?)",
      address_, absl::FormatDuration(io_timeout_), op, key));
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  const tcp_store::Op op = tcp_store::Op::kSet;
  uint8_t stored = 0;
  if (!tcp_store::WriteAll(fd_, &op, sizeof(op)) || !tcp_store::WriteBlob(fd_, key) ||
      !tcp_store::WriteBlob(fd_, value) || !tcp_store::ReadAll(fd_, &stored, 1)) {
    return Lost("set", key);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> TcpStoreClient::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const tcp_store::Op op = tcp_store::Op::kGet;
  uint8_t found = 0;
  if (!tcp_store::WriteAll(fd_, &op, sizeof(op)) || !tcp_store::WriteBlob(fd_, key) ||
      !tcp_store::WriteBlob(fd_, "") || !tcp_store::ReadAll(fd_, &found, 1)) {
    return Lost("get", key);
  }
  if (found == 0) return std::optional<std::string>();
  std::string value;
  if (!tcp_store::ReadBlob(fd_, &value)) return Lost("get", key);
  return std::optional<std::string>(std::move(value));
}

void TcpStoreClient::Post(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  const tcp_store::Op op = tcp_store::Op::kPost;
  // Diagnostics only: a failure here surfaces at the next Set or Get.
  (void)(tcp_store::WriteAll(fd_, &op, sizeof(op)) && tcp_store::WriteBlob(fd_, key) &&
         tcp_store::WriteBlob(fd_, value));
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
