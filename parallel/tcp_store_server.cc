#include "parallel/tcp_store_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "parallel/tcp_store_wire.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(int port) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrFormat("TCP store: socket: %s", std::strerror(errno)));
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
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(fd, ntohs(address.sin6_port)));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port) : listen_fd_(listen_fd), port_(port) {
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

void TcpStoreServer::Serve(int fd) {
  while (true) {
    tcp_store::Op op;
    std::string key, value;
    if (!tcp_store::ReadAll(fd, &op, sizeof(op)) || !tcp_store::ReadBlob(fd, &key) ||
        !tcp_store::ReadBlob(fd, &value)) {
      break;
    }
    if (op == tcp_store::Op::kSet || op == tcp_store::Op::kPost) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        values_[key] = std::move(value);
      }
      const uint8_t stored = 1;
      if (op == tcp_store::Op::kSet && !tcp_store::WriteAll(fd, &stored, 1)) break;
    } else if (op == tcp_store::Op::kGet) {
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
      if (!tcp_store::WriteAll(fd, &found, 1)) break;
      if (found == 1 && !tcp_store::WriteBlob(fd, found_value)) break;
    } else {
      break;  // not a client of this store
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
