// The rendezvous for nodes without a shared file system: every rank connects to the
// TCP store (tcp_store_server.h) that global rank 0 serves at MASTER_ADDR:MASTER_PORT,
// as torchrun's c10d store does. Group `name`'s keys live under "name/", its progress
// board under "name/.progress/<rank>"; one connection per process carries them all.
#ifndef CONVEYOR_PARALLEL_TCP_RENDEZVOUS_H_
#define CONVEYOR_PARALLEL_TCP_RENDEZVOUS_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/rendezvous_point.h"
#include "parallel/tcp_store_wire.h"

namespace conveyor {

// One connection to the store, shared by the process's groups and threads.
class TcpStoreClient {
 public:
  // Connects to host:port as `self` and completes the handshake (tcp_store_wire.h),
  // retrying while nothing listens there (rank 0 may not listen yet) or the name server
  // does not answer (EAI_AGAIN), all within `timeout`; the handshake returns once the
  // store admits this rank, when every rank has come. Fails at once, naming host:port
  // and the fix, when MASTER_ADDR does not resolve for good (InvalidArgument), the
  // program there is not a Conveyor store, serves another job (the job ids differ),
  // global rank 0 has another WORLD_SIZE, or another process holds this rank
  // (AlreadyExists). Each later request gives up after `timeout` too; once one has
  // failed, the connection is out of step, and every later one fails as it did.
  static absl::StatusOr<std::shared_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                                 const tcp_store::Membership& self,
                                                                 absl::Duration timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  absl::Status Set(const std::string& key, const std::string& value);
  // nullopt when the key is not (yet) there. Gives up after `limit` when that is shorter
  // than the connection's timeout (diagnostics read after a failure, which must not
  // wait a whole timeout more for a store behind a lost link).
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key,
                                                 absl::Duration limit = absl::InfiniteDuration());
  // Set without waiting for the answer; best effort.
  void Post(const std::string& key, const std::string& value);

  const std::string& address() const { return address_; }  // "host:port"

 private:
  TcpStoreClient(int fd, std::string address, absl::Duration io_timeout)
      : fd_(fd), address_(std::move(address)), io_timeout_(io_timeout) {}
  // Records and returns the failure of a request; the caller holds mu_.
  absl::Status Lost(const char* op, const std::string& key, absl::Duration waited);

  std::mutex mu_;  // one request and its answer at a time
  int fd_;
  std::string address_;
  absl::Duration io_timeout_;
  absl::Status failure_;  // the first request that failed
};

class TcpRendezvous : public RendezvousPoint {
 public:
  explicit TcpRendezvous(std::shared_ptr<TcpStoreClient> client) : client_(std::move(client)) {}

  std::string Describe() const override { return "TCP store " + client_->address(); }
  absl::StatusOr<std::unique_ptr<RendezvousStore>> OpenStore(const std::string& name,
                                                             absl::Duration timeout) const override;
  absl::StatusOr<std::unique_ptr<ProgressBoard>> OpenBoard(const std::string& name, int rank,
                                                           int size) const override;

 private:
  std::shared_ptr<TcpStoreClient> client_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_TCP_RENDEZVOUS_H_
