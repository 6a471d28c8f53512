// The key-value server behind TcpRendezvous: global rank 0 runs it at MASTER_PORT for
// the life of the job's process groups, and every rank (rank 0 included) talks to it
// as a client (tcp_store_wire.h). One thread accepts; each connection has its own
// thread, which answers that client's requests in order.
#ifndef CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_
#define CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace conveyor {

class TcpStoreServer {
 public:
  // Listens on `port` (0: any free port, for tests) on every interface. Fails naming
  // the port when it cannot (in use, not permitted).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(int port);
  // Stops accepting, closes every connection and joins the threads.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  TcpStoreServer(int listen_fd, int port);
  void AcceptConnections();
  // Answers one client until it disconnects or sends something malformed.
  void Serve(int fd);

  int listen_fd_;
  int port_;
  std::mutex mu_;
  bool stopping_ = false;
  std::map<std::string, std::string> values_;
  std::vector<int> connections_;  // open client sockets, to wake their threads at the end
  std::vector<std::thread> servers_;
  std::thread acceptor_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_
