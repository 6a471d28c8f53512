// The key-value server behind TcpRendezvous: global rank 0 runs it at MASTER_PORT for
// the life of the job's process groups, and every rank (rank 0 included) talks to it
// as a client (tcp_store_wire.h). One thread accepts; each connection has its own
// thread, which answers that client's requests in order. The server's own waits (accept,
// a client's next request) are bounded by its life: the destructor shuts every socket
// down, which wakes them.
#ifndef CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_
#define CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/tcp_store_wire.h"

namespace conveyor {

class TcpStoreServer {
 public:
  // Listens on `port` (0: any free port, for tests) on every interface, as global rank
  // 0 of the job `rank0` describes, which the handshake tells every client. Fails
  // naming the port when it cannot (in use, not permitted).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(int port,
                                                               const tcp_store::Membership& rank0);
  // Stops accepting, closes every connection and joins the threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

  // Global rank 0, before the groups are built: waits until every rank 1..world_size-1
  // of its job (the same job id) has completed the handshake. Fails at once, naming
  // both world sizes, when one of them says another WORLD_SIZE (so does that rank: each
  // side compares), and after `timeout`, naming the ranks that never came.
  absl::Status AwaitRanks(absl::Duration timeout);

 private:
  TcpStoreServer(int listen_fd, int port, tcp_store::Membership rank0);
  void AcceptConnections();
  // Answers one client until it disconnects or sends something malformed.
  void Serve(int fd);
  // The handshake: false when the client is not a Conveyor store client.
  bool Welcome(int fd);
  // One request and its answer: false at the end of the stream or on a malformed one.
  bool Answer(int fd);

  int listen_fd_;
  int port_;
  tcp_store::Membership rank0_;
  std::mutex mu_;
  // The WORLD_SIZE each rank of this job said in its handshake, by global rank.
  std::map<int, int> world_sizes_;
  bool stopping_ = false;
  std::map<std::string, std::string> values_;
  std::vector<int> connections_;  // open client sockets, to wake their threads at the end
  std::vector<std::thread> servers_;
  std::thread acceptor_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_
