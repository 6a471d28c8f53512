// The key-value server behind TcpRendezvous: global rank 0 runs it at MASTER_PORT for
// the life of the job's process groups, and every rank (rank 0 included) talks to it
// as a client (tcp_store_wire.h). One thread accepts; each connection has its own
// thread, which answers that client's requests in order. The server's own waits (accept,
// a client's next request) are bounded by its life: the destructor shuts every socket
// down, which wakes them.
//
// Admission: the server answers a rank r > 0 of its job only once every rank 1..n-1 has
// come (or the job cannot assemble), so that a rank learns at the handshake why the job
// failed to form. A second process claiming a rank is refused naming the first; before
// the job has assembled this fails the whole job (both claimants, and rank 0, say so:
// one of the processes was meant to be another rank), after it the newcomer alone. A
// rank of another job is turned away (it refuses itself on seeing rank 0's job) and must
// not end this job; rank 0 names it if its wait for the missing ranks ends.
#ifndef CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_
#define CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
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
  // side compares), or naming both processes when two claim one rank; after `timeout`,
  // naming the ranks that never came and the peers the store turned away meanwhile.
  // The ranks still waiting to be admitted are told the same.
  absl::Status AwaitRanks(absl::Duration timeout);

 private:
  TcpStoreServer(int listen_fd, int port, tcp_store::Membership rank0);
  // A process that claims a global rank of this job.
  struct Claim {
    int world_size;
    std::string address;  // the client's "ip:port", for messages
  };

  void AcceptConnections();
  // Answers one client, connected from `address`, until it disconnects or sends
  // something malformed.
  void Serve(int fd, const std::string& address);
  // The handshake: false when the client is not a Conveyor store client or was refused.
  bool Welcome(int fd, const std::string& address);
  // The handshake's verdict for `client`: empty to admit it, else the refusal as
  // tcp_store::EncodeVerdict writes it. Waits for the job to assemble (ranks > 0).
  std::string Admit(const tcp_store::Membership& client, const std::string& address);
  // The refusal of a second process claiming `rank` (from `second`; the first came from
  // `first`); before the job has assembled it fails the job. The caller holds mu_.
  absl::Status ClaimedTwice(int rank, const std::string& first, const std::string& second);
  // Records a peer refused (for rank 0's message should its wait end) and warns at once.
  // The caller holds mu_.
  void TurnAway(std::string peer);
  // Records why the job cannot assemble (the first reason wins) and wakes the waiters.
  // The caller holds mu_.
  void FailAssembly(absl::Status why);
  // Why the wait for `missing` ended after `timeout`, with the peers turned away.
  absl::Status NeverCame(const std::vector<int>& missing, absl::Duration timeout) const;
  // One request and its answer: false at the end of the stream or on a malformed one.
  bool Answer(int fd);

  int listen_fd_;
  int port_;
  tcp_store::Membership rank0_;
  std::mutex mu_;
  std::condition_variable changed_;       // any of the fields below changed
  std::map<int, Claim> claims_;           // this job's ranks > 0 by global rank
  bool assembled_ = false;                // every rank 1..n-1 has claimed its place
  absl::Status failure_;                  // why the job cannot assemble
  std::vector<std::string> turned_away_;  // peers refused, described for rank 0's message
  int verdicts_pending_ = 0;              // handshakes whose verdict is not written yet
  bool stopping_ = false;
  std::map<std::string, std::string> values_;
  std::vector<int> connections_;  // open client sockets, to wake their threads at the end
  std::vector<std::thread> servers_;
  std::thread acceptor_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_TCP_STORE_SERVER_H_
