#include "parallel/tcp_store_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "parallel/rendezvous_point.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    int port, const tcp_store::Membership& rank0) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, "TCP store: socket");
  }
  const int on = 1, off = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));  // IPv4 clients too
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_any;
  address.sin6_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrFormat(
        "TCP store: cannot listen on MASTER_PORT %d: %s (pick a free port for MASTER_PORT)", port,
        error));
  }
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(fd, ntohs(address.sin6_port), rank0));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port, tcp_store::Membership rank0)
    : listen_fd_(listen_fd), port_(port), rank0_(std::move(rank0)) {
  acceptor_ = std::thread([this] { AcceptConnections(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);  // wakes their reads
  }
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  ::close(listen_fd_);
  for (std::thread& t : servers_) t.join();  // no new ones once the acceptor is gone
}

void TcpStoreServer::AcceptConnections() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (fd < 0 || stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    connections_.push_back(fd);
    servers_.emplace_back([this, fd] { Serve(fd); });
  }
}

absl::Status TcpStoreServer::AwaitRanks(absl::Duration timeout) {
  const std::string where = absl::StrCat("the TCP store global rank 0 serves at port ", port_);
  Poller poller(absl::ToChronoNanoseconds(timeout));
  while (true) {
    std::vector<int> missing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [rank, world_size] : world_sizes_) {
        RETURN_IF_ERROR(CheckWorldSize(rank, world_size, rank0_.world_size, where));
      }
      for (int r = 1; r < rank0_.world_size; ++r) {
        if (world_sizes_.count(r) == 0) missing.push_back(r);
      }
    }
    if (missing.empty()) return absl::OkStatus();
    if (poller.Expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank(s) %s of %d never reached %s within %s; start every rank with MASTER_ADDR set "
          "to this host, the same port (MASTER_PORT, or CONVEYOR_STORE_PORT) and WORLD_SIZE %d, "
          "and look for an earlier error from the missing ranks",
          absl::StrJoin(missing, ", "), rank0_.world_size, where, absl::FormatDuration(timeout),
          rank0_.world_size));
    }
    poller.Sleep();
  }
}

bool TcpStoreServer::Welcome(int fd) {
  const absl::Time no_deadline = absl::InfiniteFuture();
  std::string hello(tcp_store::kHello.size(), '\0');
  tcp_store::Membership client;
  if (!tcp_store::ReadAll(fd, hello.data(), hello.size(), no_deadline) ||
      hello != tcp_store::kHello || !tcp_store::ReadMembership(fd, &client, no_deadline)) {
    return false;  // not a client of this store
  }
  if (client.job_id == rank0_.job_id) {  // another job's ranks learn so from the answer
    std::lock_guard<std::mutex> lock(mu_);
    world_sizes_[client.rank] = client.world_size;
  }
  return tcp_store::WriteAll(fd, tcp_store::kWelcome.data(), tcp_store::kWelcome.size(),
                             no_deadline) &&
         tcp_store::WriteMembership(fd, rank0_, no_deadline);
}

bool TcpStoreServer::Answer(int fd) {
  const absl::Time no_deadline = absl::InfiniteFuture();
  tcp_store::Op op;
  std::string key, value;
  if (!tcp_store::ReadAll(fd, &op, sizeof(op), no_deadline) ||
      !tcp_store::ReadBlob(fd, &key, no_deadline) ||
      !tcp_store::ReadBlob(fd, &value, no_deadline)) {
    return false;
  }
  if (op == tcp_store::Op::kSet || op == tcp_store::Op::kPost) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      values_[key] = std::move(value);
    }
    const uint8_t stored = 1;
    return op == tcp_store::Op::kPost || tcp_store::WriteAll(fd, &stored, 1, no_deadline);
  }
  if (op == tcp_store::Op::kGet) {
    std::string found_value;
    uint8_t found = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = values_.find(key);
      if (it != values_.end()) {
        found = 1;
        found_value = it->second;
      }
    }
    return tcp_store::WriteAll(fd, &found, 1, no_deadline) &&
           (found == 0 || tcp_store::WriteBlob(fd, found_value, no_deadline));
  }
  return false;  // not a client of this store
}

void TcpStoreServer::Serve(int fd) {
  if (Welcome(fd)) {
    while (Answer(fd)) {
    }
  }
  // The destructor may be shutting this socket down; close it only under the lock.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    if (*it == fd) {
      connections_.erase(it);
      break;
    }
  }
  ::close(fd);
}

}  // namespace conveyor
