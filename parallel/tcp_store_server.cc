#include "parallel/tcp_store_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "parallel/rendezvous_point.h"

namespace conveyor {
namespace {

std::string Where(int port) {
  return absl::StrCat("the TCP store global rank 0 serves at port ", port);
}

// "ip:port" of a peer, without the IPv4-mapped prefix an IPv6 socket gives IPv4 peers.
std::string PeerAddress(const sockaddr_storage& peer, socklen_t length) {
  char host[NI_MAXHOST] = {}, port[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&peer), length, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown address";
  }
  const absl::string_view ip = absl::StripPrefix(host, "::ffff:");
  return ip.find(':') == absl::string_view::npos ? absl::StrCat(ip, ":", port)
                                                 : absl::StrCat("[", ip, "]:", port);
}

}  // namespace

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
    : listen_fd_(listen_fd),
      port_(port),
      rank0_(std::move(rank0)),
      assembled_(rank0_.world_size <= 1) {
  acceptor_ = std::thread([this] { AcceptConnections(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    // The handshakes waiting for a verdict get theirs (why the job could not assemble)
    // before their sockets go: each is a few bytes into an empty socket buffer.
    changed_.notify_all();
    changed_.wait(lock, [this] { return verdicts_pending_ == 0; });
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);  // wakes their reads
  }
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  ::close(listen_fd_);
  for (std::thread& t : servers_) t.join();  // no new ones once the acceptor is gone
}

void TcpStoreServer::AcceptConnections() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (fd < 0 || stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    connections_.push_back(fd);
    servers_.emplace_back([this, fd, address = PeerAddress(peer, length)] { Serve(fd, address); });
  }
}

absl::Status TcpStoreServer::AwaitRanks(absl::Duration timeout) {
  // Capped: the condition variable adds the wait to the clock's now, where an infinite
  // one (nanoseconds::max()) would overflow.
  const absl::Duration wait = std::min(timeout, absl::Hours(24 * 365 * 10));
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, absl::ToChronoNanoseconds(wait),
                    [this] { return assembled_ || !failure_.ok(); });
  if (assembled_) return absl::OkStatus();
  if (failure_.ok()) {
    std::vector<int> missing;
    for (int r = 1; r < rank0_.world_size; ++r) {
      if (claims_.count(r) == 0) missing.push_back(r);
    }
    FailAssembly(NeverCame(missing, timeout));
  }
  return failure_;
}

absl::Status TcpStoreServer::NeverCame(const std::vector<int>& missing,
                                       absl::Duration timeout) const {
  std::string message = absl::StrFormat(
      "rank(s) %s of %d never reached %s within %s; start every rank with MASTER_ADDR set to "
      "this host, the same port (MASTER_PORT, or CONVEYOR_STORE_PORT) and WORLD_SIZE %d, and "
      "look for an earlier error from the missing ranks",
      absl::StrJoin(missing, ", "), rank0_.world_size, Where(port_), absl::FormatDuration(timeout),
      rank0_.world_size);
  if (!turned_away_.empty()) {
    absl::StrAppend(&message, "; meanwhile the store turned away ",
                    absl::StrJoin(turned_away_, "; and "));
  }
  return absl::DeadlineExceededError(message);
}

void TcpStoreServer::TurnAway(std::string peer) {
  // Said at once too, for whoever watches rank 0's log: the job goes on without it.
  std::cerr << "conveyor: warning: global rank 0's TCP store at port " << port_ << " turned away "
            << peer << "\n";
  turned_away_.push_back(std::move(peer));
}

void TcpStoreServer::FailAssembly(absl::Status why) {
  if (failure_.ok()) failure_ = std::move(why);
  changed_.notify_all();
}

std::string TcpStoreServer::Admit(const tcp_store::Membership& client, const std::string& address) {
  std::unique_lock<std::mutex> lock(mu_);
  if (client.job_id != rank0_.job_id) {
    // It refuses itself on reading rank 0's job; one that this job waits for may have
    // been meant for it, so rank 0 names it if the wait ends.
    TurnAway(absl::StrFormat(
        "global rank %d of job %s (WORLD_SIZE %d) from %s, a rank of another job: this job is "
        "%s; give each job a port of its own, or, if it belongs to this job, start it with "
        "this job's id",
        client.rank, tcp_store::DescribeJob(client.job_id), client.world_size, address,
        tcp_store::DescribeJob(rank0_.job_id)));
    return tcp_store::EncodeVerdict(absl::FailedPreconditionError("another job"));
  }
  if (absl::Status s =
          CheckWorldSize(client.rank, client.world_size, rank0_.world_size, Where(port_));
      !s.ok()) {
    FailAssembly(s);
    return tcp_store::EncodeVerdict(s);
  }
  if (client.rank == 0) return "";  // global rank 0's own connection
  if (const auto held = claims_.find(client.rank); held != claims_.end()) {
    return tcp_store::EncodeVerdict(ClaimedTwice(client.rank, held->second.address, address));
  }
  claims_[client.rank] = {client.world_size, address};
  if (static_cast<int>(claims_.size()) == rank0_.world_size - 1) {
    assembled_ = true;
    changed_.notify_all();
  }
  changed_.wait(lock, [this] { return assembled_ || !failure_.ok() || stopping_; });
  if (assembled_) return "";
  // The reason the job cannot assemble, when there is one, even if the store is
  // shutting down by now (global rank 0 ends on that reason).
  return tcp_store::EncodeVerdict(
      failure_.ok() ? absl::UnavailableError("global rank 0's store shut down") : failure_);
}

absl::Status TcpStoreServer::ClaimedTwice(int rank, const std::string& first,
                                          const std::string& second) {
  const std::string fix = absl::StrFormat(
      "start each rank once, with its own RANK (SLURM_PROCID under srun) below WORLD_SIZE %d",
      rank0_.world_size);
  TurnAway(
      absl::StrFormat("a second process claiming global rank %d, from %s (the first came from %s)",
                      rank, second, first));
  if (assembled_) {  // the job runs without it
    return absl::AlreadyExistsError(absl::StrFormat(
        "global rank %d was already claimed by the process at %s, and the job has started "
        "without this one (from %s); %s",
        rank, first, second, fix));
  }
  // One of the two was meant to be another rank, which is missing: the job cannot form.
  FailAssembly(absl::AlreadyExistsError(absl::StrFormat(
      "global rank %d was claimed by two processes at %s, from %s and from %s: one of them was "
      "meant to be another rank (or is left from an earlier launch); %s",
      rank, Where(port_), first, second, fix)));
  return failure_;
}

bool TcpStoreServer::Welcome(int fd, const std::string& address) {
  const absl::Time no_deadline = absl::InfiniteFuture();
  std::string hello(tcp_store::kHello.size(), '\0');
  tcp_store::Membership client;
  if (!tcp_store::ReadAll(fd, hello.data(), hello.size(), no_deadline) ||
      hello != tcp_store::kHello || !tcp_store::ReadMembership(fd, &client, no_deadline)) {
    return false;  // not a client of this store
  }
  // Rank 0's membership first: a client of another job or world size refuses itself at
  // once, without waiting for the verdict.
  if (!tcp_store::WriteAll(fd, tcp_store::kWelcome.data(), tcp_store::kWelcome.size(),
                           no_deadline) ||
      !tcp_store::WriteMembership(fd, rank0_, no_deadline)) {
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++verdicts_pending_;
  }
  const std::string verdict = Admit(client, address);
  const bool written = tcp_store::WriteBlob(fd, verdict, absl::Now() + absl::Seconds(5));
  {
    std::lock_guard<std::mutex> lock(mu_);
    --verdicts_pending_;
  }
  changed_.notify_all();
  return written && verdict.empty();
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

void TcpStoreServer::Serve(int fd, const std::string& address) {
  if (Welcome(fd, address)) {
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
