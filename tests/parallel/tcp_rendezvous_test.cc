// The TCP rendezvous (parallel/tcp_rendezvous.h, tcp_store_server.h): the store global
// rank 0 serves when the ranks share no directory. Keys cross clients and stay within
// their group, waits end in a timeout that names the missing keys, progress boards
// read every rank's latest post, failures name MASTER_ADDR/MASTER_PORT, and a gloo
// rendezvous over it names the rank that never came. Another program on the port is
// told from a store at the handshake, at once when it answers anything, within the
// timeout when it answers nothing; so are ranks of another job or world size. The
// multi-process run of every process group over the TCP store is in parallel_state_test.
#include "parallel/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gloo/common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/collective_failure.h"
#include "parallel/gloo_communicator.h"
#include "parallel/tcp_store_server.h"
#include "parallel/tcp_store_wire.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0, {});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_a_ = Connect("127.0.0.1");
    client_b_ = Connect("localhost");  // the server takes IPv4 and IPv6 alike
  }

  std::shared_ptr<TcpStoreClient> Connect(const std::string& host) {
    absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
        TcpStoreClient::Connect(host, server_->port(), {}, absl::Seconds(5));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *client : nullptr;
  }

  std::unique_ptr<RendezvousStore> Store(const std::shared_ptr<TcpStoreClient>& client,
                                         const std::string& group, absl::Duration timeout) {
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store =
        TcpRendezvous(client).OpenStore(group, timeout);
    EXPECT_TRUE(store.ok()) << store.status();
    return *std::move(store);
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<TcpStoreClient> client_a_, client_b_;
};

TEST_F(TcpStoreTest, KeysCrossClientsAndStayInTheirGroup) {
  auto tp_on_a = Store(client_a_, "tp[0,1]", absl::Seconds(1));
  auto tp_on_b = Store(client_b_, "tp[0,1]", absl::Seconds(1));
  auto dp_on_b = Store(client_b_, "dp[0,2]", absl::Seconds(1));
  EXPECT_FALSE(tp_on_b->Has("rank_0"));
  tp_on_a->set("rank_0", Bytes("address of rank 0"));
  EXPECT_TRUE(tp_on_b->Has("rank_0"));
  EXPECT_EQ(tp_on_b->get("rank_0"), Bytes("address of rank 0"));
  EXPECT_FALSE(dp_on_b->Has("rank_0"));
  tp_on_b->set("rank_0", Bytes(""));  // overwritten, and empty values are values
  EXPECT_EQ(tp_on_a->get("rank_0"), Bytes(""));
  absl::StatusOr<std::optional<std::string>> missing = client_a_->Get("tp[0,1]/rank_9");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());
}

TEST_F(TcpStoreTest, WaitTimesOutNamingTheMissingKeys) {
  auto store = Store(client_a_, "tp[0,1]", absl::Milliseconds(50));
  store->set("rank_0", Bytes("x"));
  try {
    store->wait({"rank_0", "rank_1"});
    ADD_FAILURE() << "wait returned without rank_1";
  } catch (const gloo::IoException& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, AllOf(HasSubstr(absl::StrCat("127.0.0.1:", server_->port())),
                               HasSubstr("(tp[0,1])"), HasSubstr("waiting for key(s) rank_1")));
    EXPECT_THAT(message, Not(HasSubstr("rank_0")));
  }
}

TEST_F(TcpStoreTest, ProgressBoardsReadEveryRanksLatestPost) {
  TcpRendezvous on_a(client_a_), on_b(client_b_);
  auto rank0 = *on_a.OpenBoard("pp[0,4,8]", 0, 3);
  auto rank2 = *on_b.OpenBoard("pp[0,4,8]", 2, 3);
  rank0->Post(3, "AllReduceSum");
  // Posts are not answered; a round trip on the same connection orders them before
  // what the other client reads.
  ASSERT_TRUE(client_a_->Get("sync").ok());
  rank2->Post(4, "BatchSendRecv");
  rank2->Post(5, "Barrier");
  const std::vector<ProgressBoard::Entry> entries = rank2->Read();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].seq, 3);
  EXPECT_EQ(entries[0].activity, "AllReduceSum");
  EXPECT_EQ(entries[1].seq, -1);  // never posted
  EXPECT_EQ(entries[2].seq, 5);
  EXPECT_EQ(entries[2].activity, "Barrier");
}

TEST_F(TcpStoreTest, ClientsLearnThatTheServerIsGone) {
  server_.reset();
  absl::StatusOr<std::optional<std::string>> value = client_a_->Get("tp[0,1]/rank_0");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(value.status().message(),
              AllOf(HasSubstr("or lost the connection"), HasSubstr("global rank 0")));
}

TEST(TcpStoreServerTest, RefusesAPortInUseNamingIt) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> first = TcpStoreServer::Start(0, {});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> second =
      TcpStoreServer::Start((*first)->port(), {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on MASTER_PORT ", (*first)->port())));
}

TEST(TcpStoreClientTest, ConnectGivesUpNamingTheAddress) {
  int port = 0;
  {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> gone = TcpStoreServer::Start(0, {});
    ASSERT_TRUE(gone.ok()) << gone.status();
    port = (*gone)->port();
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> refused =
      TcpStoreClient::Connect("127.0.0.1", port, {}, absl::Milliseconds(300));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));  // it kept trying
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr(absl::StrCat("MASTER_ADDR:MASTER_PORT = 127.0.0.1:", port)),
                    HasSubstr("global rank 0")));
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> unknown =
      TcpStoreClient::Connect("no-such-host.invalid", port, {}, absl::Milliseconds(100));
  EXPECT_THAT(unknown.status().message(), HasSubstr("cannot resolve MASTER_ADDR"));
}

// A program other than a Conveyor store, listening on a loopback port: it accepts each
// connection in turn and runs `serve` on it (nothing at all: it never accepts), then
// keeps the connection open until the server goes.
class ForeignServer {
 public:
  explicit ForeignServer(std::function<void(int fd)> serve) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    EXPECT_EQ(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
    if (serve == nullptr) return;
    acceptor_ = std::thread([this, serve] {
      for (int fd; (fd = ::accept(listen_fd_, nullptr, nullptr)) >= 0;) {
        serve(fd);
        open_.push_back(fd);
      }
    });
  }
  ~ForeignServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // ends accept()
    if (acceptor_.joinable()) acceptor_.join();
    for (int fd : open_) ::close(fd);
    ::close(listen_fd_);
  }

  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<int> open_;
  std::thread acceptor_;
};

void Send(int fd, absl::string_view text) {
  EXPECT_TRUE(tcp_store::WriteAll(fd, text.data(), text.size(), absl::InfiniteFuture()));
}

// A Conveyor store's side of the handshake, as global rank 0 of `rank0`.
void AnswerHandshake(int fd, const tcp_store::Membership& rank0) {
  std::string hello(tcp_store::kHello.size(), '\0');
  tcp_store::Membership client;
  EXPECT_TRUE(tcp_store::ReadAll(fd, hello.data(), hello.size(), absl::InfiniteFuture()));
  EXPECT_TRUE(tcp_store::ReadMembership(fd, &client, absl::InfiniteFuture()));
  Send(fd, tcp_store::kWelcome);
  EXPECT_TRUE(tcp_store::WriteMembership(fd, rank0, absl::InfiniteFuture()));
  EXPECT_TRUE(tcp_store::WriteBlob(fd, "", absl::InfiniteFuture()));  // admitted
}

// An HTTP server's answer to anything that is not HTTP, once the request has ended.
void AnswerLikeHttp(int fd) {
  std::string request;
  char c;
  while (!absl::EndsWith(request, "\r\n\r\n") &&
         tcp_store::ReadAll(fd, &c, 1, absl::InfiniteFuture())) {
    request.push_back(c);
  }
  Send(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
}

// What is said about every program on the store's port that is not a Conveyor store.
::testing::Matcher<const std::string&> NamesTheForeignPort(const ForeignServer& server) {
  return AllOf(HasSubstr("MASTER_ADDR:MASTER_PORT = " + server.address()),
               HasSubstr("not a Conveyor store"), HasSubstr("another program listens there"),
               HasSubstr("CONVEYOR_STORE_PORT to another free port"));
}

TEST(TcpStoreClientTest, AProgramThatNeverAnswersTheHandshakeEndsWithinTheTimeout) {
  const ForeignServer silent(nullptr);  // connections complete (the backlog), unanswered
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", silent.port(), {}, absl::Seconds(5));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(client.status().message()),
              AllOf(NamesTheForeignPort(silent),
                    HasSubstr("did not answer the TCP store's handshake within 5s")));
  EXPECT_GE(took, absl::Seconds(5));
  // The old wait was 3 x the timeout (15 s); the bound leaves a loaded machine 5 s.
  EXPECT_LT(took, absl::Seconds(10)) << "3 x the timeout again";
}

TEST(TcpStoreClientTest, AProgramThatAnswersSomethingElseIsRecognisedAtOnce) {
  const ForeignServer ssh([](int fd) { Send(fd, "SSH-2.0-OpenSSH_9.6\r\n"); });
  const ForeignServer http(AnswerLikeHttp);
  const ForeignServer closer([](int fd) { ::shutdown(fd, SHUT_RDWR); });
  const struct {
    const ForeignServer& server;
    absl::StatusCode code;
    std::string says;
  } cases[] = {
      {ssh, absl::StatusCode::kFailedPrecondition,
       "answered the TCP store's handshake with \"SSH-2.0-OpenSSH_9.6\\r\\n\""},
      {http, absl::StatusCode::kFailedPrecondition,
       "answered the TCP store's handshake with \"HTTP/1.1 400 Bad Request"},
      {closer, absl::StatusCode::kUnavailable,
       "accepted the connection, then closed it without answering the TCP store's handshake"},
  };
  for (const auto& c : cases) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
        TcpStoreClient::Connect("127.0.0.1", c.server.port(), {}, absl::Seconds(30));
    EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "waited for the timeout: " << c.says;
    EXPECT_EQ(client.status().code(), c.code) << client.status();
    EXPECT_THAT(std::string(client.status().message()),
                AllOf(NamesTheForeignPort(c.server), HasSubstr(c.says)));
  }
}

TEST(TcpStoreClientTest, AStoreThatNeverAnswersEndsInAnErrorNotAHang) {
  // A store that completes the handshake, then never answers a request.
  const ForeignServer silent([](int fd) { AnswerHandshake(fd, {}); });
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", silent.port(), {}, absl::Seconds(6));
  ASSERT_TRUE(client.ok()) << client.status();
  // A hang would end at the test's own timeout.
  absl::StatusOr<std::optional<std::string>> value = (*client)->Get("tp[0,1]/rank_0");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(value.status().message(), HasSubstr("no answer within 6s"));
  // The connection is out of step now: every later request fails the same way at once,
  // not after another 6 s.
  const absl::Time later = absl::Now();
  EXPECT_EQ((*client)->Set("tp[0,1]/rank_1", "x"), value.status());
  EXPECT_LT(absl::Now() - later, absl::Seconds(3));
}

// A former hang: a gloo rendezvous over a store that stopped answering waited for
// its arrival to be stored, then for each member's arrival to be looked up (3 x the
// timeout for two ranks). It ends within about one timeout now.
TEST(TcpStoreClientTest, ARendezvousOverAStoreThatStoppedAnsweringEndsWithinTheTimeout) {
  const ForeignServer silent([](int fd) { AnswerHandshake(fd, {}); });
  const absl::Duration timeout = absl::Seconds(5);
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", silent.port(), {}, timeout);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> device = CreateGlooDevice("127.0.0.1");
  ASSERT_TRUE(device.ok()) << device.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create({"world[0,1]", {0, 1}, 0}, TcpRendezvous(*client), *device, timeout);
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(comm.ok());
  EXPECT_THAT(comm.status().message(), HasSubstr("no answer within 5s"));
  EXPECT_LT(took, 2 * timeout) << "3 x the timeout again";
}

// A collective that timed out because the link to rank 0's node is gone: reading the
// progress board (for its message) from the store behind that link waited a whole
// timeout more. It gives up after a few seconds and says the progress is unknown.
TEST(TcpStoreClientTest, AProgressBoardBehindALostLinkIsReadQuicklyAndSaysSo) {
  const ForeignServer silent([](int fd) { AnswerHandshake(fd, {}); });
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", silent.port(), {}, absl::Minutes(10));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<ProgressBoard>> board =
      TcpRendezvous(*client).OpenBoard("dp[0,2]", 0, 2);
  ASSERT_TRUE(board.ok()) << board.status();
  const absl::Time start = absl::Now();
  const std::vector<ProgressBoard::Entry> entries = (*board)->Read();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "a whole timeout again";
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_TRUE(entries[0].unknown && entries[1].unknown);
  CollectiveFailure failure;
  failure.op = "AllReduceSum";
  failure.seq = 9;
  failure.collective = true;
  failure.timed_out = true;
  failure.timeout = absl::Minutes(1);
  failure.waited = absl::Minutes(1);
  const absl::Status status =
      CollectiveFailureStatus(failure, {"dp[0,2]", {0, 2}, 0}, entries, "gloo");
  EXPECT_THAT(status.message(),
              HasSubstr("ranks that did not arrive: group rank 1 (global rank 2, progress unknown: "
                        "the rendezvous store did not answer"));
}

TEST(TcpStoreServerTest, ARankOfAnotherWorldSizeIsRefusedAndNamedOnBothSides) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0, {0, 2, ""});
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("localhost", (*server)->port(), {1, 3, ""}, absl::Seconds(30));
  const absl::Status rank0 = (*server)->AwaitRanks(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "waited for the timeout";
  const std::string said = "global rank 1 has WORLD_SIZE=3, global rank 0 has WORLD_SIZE=2";
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client.status().message(),
              AllOf(HasSubstr(absl::StrCat("TCP store localhost:", (*server)->port())),
                    HasSubstr(said), HasSubstr("same world size (WORLD_SIZE")));
  EXPECT_EQ(rank0.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      rank0.message(),
      AllOf(HasSubstr(absl::StrCat("store global rank 0 serves at port ", (*server)->port())),
            HasSubstr(said)));
}

// Rank 2 never comes: rank 0 names it when its wait ends, and rank 1, which the store
// holds at the handshake until the job has assembled, is told the same.
TEST(TcpStoreServerTest, RankZeroNamesTheRanksThatNeverCame) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0, {0, 3, ""});
  ASSERT_TRUE(server.ok()) << server.status();
  auto rank1 = std::async(std::launch::async, [port = (*server)->port()] {
    return TcpStoreClient::Connect("127.0.0.1", port, {1, 3, ""}, absl::Seconds(20));
  });
  const absl::Time start = absl::Now();
  const absl::Status rank0 = (*server)->AwaitRanks(absl::Milliseconds(300));
  const absl::StatusOr<std::shared_ptr<TcpStoreClient>> told = rank1.get();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "rank 1 waited for its own timeout";
  EXPECT_EQ(rank0.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(rank0.message(), AllOf(HasSubstr("rank(s) 2 of 3 never reached"),
                                     HasSubstr("within 300ms"), HasSubstr("WORLD_SIZE 3")));
  EXPECT_THAT(rank0.message(), Not(HasSubstr("turned away")));
  EXPECT_EQ(told.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(told.status().message(),
              AllOf(HasSubstr("refused this process (global rank 1): rank(s) 2 of 3 never reached"),
                    HasSubstr(absl::StrCat("127.0.0.1:", (*server)->port()))));
}

// Two jobs given one MASTER_ADDR:MASTER_PORT: the second job's rank 0 cannot listen
// there, and its other ranks reach the first job's store, which must not take them in.
TEST(TcpStoreServerTest, ARankOfAnotherJobIsRefusedNamingBothJobs) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(0, {0, 2, "SLURM_JOB_ID=100"});
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> stranger = TcpStoreClient::Connect(
      "127.0.0.1", (*server)->port(), {1, 2, "SLURM_JOB_ID=200"}, absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "waited for the timeout";
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stranger.status().message(),
              AllOf(HasSubstr(absl::StrCat("127.0.0.1:", (*server)->port(), " serves another job")),
                    HasSubstr("belongs to job \"SLURM_JOB_ID=100\""),
                    HasSubstr("(global rank 1) to job \"SLURM_JOB_ID=200\""),
                    HasSubstr("give each job a port of its own")));
  // The stranger does not count as this job's rank 1; rank 0 names it when its wait ends.
  const absl::Status rank0 = (*server)->AwaitRanks(absl::Milliseconds(100));
  EXPECT_EQ(rank0.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(rank0.message(),
              AllOf(HasSubstr("rank(s) 1 of 2 never reached"),
                    HasSubstr("meanwhile the store turned away global rank 1 of job "
                              "\"SLURM_JOB_ID=200\" (WORLD_SIZE 2) from 127.0.0.1:"),
                    HasSubstr("a rank of another job: this job is \"SLURM_JOB_ID=100\"; give "
                              "each job a port of its own")));
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> unnamed =
      TcpStoreClient::Connect("127.0.0.1", (*server)->port(), {1, 2, ""}, absl::Seconds(30));
  EXPECT_THAT(unnamed.status().message(),
              HasSubstr("to job none (its launcher names no job; see CONVEYOR_JOB_ID)"));
}

// A stray rank of another job, turned away, must not end this job: when this
// job's rank 1 comes after it, the job assembles as if it had never been there.
TEST(TcpStoreServerTest, AStrayRankOfAnotherJobDoesNotEndTheJob) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(0, {0, 2, "CONVEYOR_JOB_ID=a"});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_EQ(
      TcpStoreClient::Connect("127.0.0.1", port, {1, 2, "CONVEYOR_JOB_ID=b"}, absl::Seconds(5))
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
  auto rank1 = std::async(std::launch::async, [port] {
    return TcpStoreClient::Connect("127.0.0.1", port, {1, 2, "CONVEYOR_JOB_ID=a"},
                                   absl::Seconds(20));
  });
  EXPECT_TRUE((*server)->AwaitRanks(absl::Seconds(20)).ok());
  const absl::StatusOr<std::shared_ptr<TcpStoreClient>> admitted = rank1.get();
  EXPECT_TRUE(admitted.ok()) << admitted.status();
}

// Two processes started with the same RANK. Before the job has assembled, one
// of them was meant to be another rank (which is then missing): both claimants and
// rank 0 fail at once, naming the rank and both processes' addresses.
TEST(TcpStoreServerTest, TwoClaimsOfARankBeforeTheJobAssembledFailItNamingBoth) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0, {0, 3, ""});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto claim = [port] {
    return TcpStoreClient::Connect("127.0.0.1", port, {1, 3, ""}, absl::Seconds(20));
  };
  const absl::Time start = absl::Now();
  auto first = std::async(std::launch::async, claim);
  auto second = std::async(std::launch::async, claim);
  const absl::Status rank0 = (*server)->AwaitRanks(absl::Seconds(20));
  const absl::StatusOr<std::shared_ptr<TcpStoreClient>> claimants[] = {first.get(), second.get()};
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited for the timeout";
  const auto names_both =
      AllOf(HasSubstr("global rank 1 was claimed by two processes"), HasSubstr("from 127.0.0.1:"),
            HasSubstr("and from 127.0.0.1:"), HasSubstr("start each rank once, with its own RANK"));
  EXPECT_EQ(rank0.code(), absl::StatusCode::kAlreadyExists) << rank0;
  EXPECT_THAT(rank0.message(), names_both);
  for (const auto& claimant : claimants) {
    EXPECT_EQ(claimant.status().code(), absl::StatusCode::kAlreadyExists) << claimant.status();
    EXPECT_THAT(claimant.status().message(),
                AllOf(HasSubstr("refused this process (global rank 1)"), names_both));
  }
}

// Once the job has assembled, a second process claiming a rank is refused alone, naming
// the process that holds it; the job goes on.
TEST(TcpStoreServerTest, ALateClaimOfARankIsRefusedAlone) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0, {0, 2, ""});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> holder =
      TcpStoreClient::Connect("127.0.0.1", port, {1, 2, ""}, absl::Seconds(20));
  ASSERT_TRUE(holder.ok()) << holder.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> late =
      TcpStoreClient::Connect("127.0.0.1", port, {1, 2, ""}, absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited for the timeout";
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(late.status().message(),
              AllOf(HasSubstr("refused this process (global rank 1): global rank 1 was already "
                              "claimed by the process at 127.0.0.1:"),
                    HasSubstr("the job has started without this one")));
  EXPECT_TRUE((*server)->AwaitRanks(absl::Seconds(1)).ok());
  EXPECT_TRUE((*holder)->Set("k", "v").ok());
}

// A MASTER_ADDR that does not resolve (the resolver answered that the name
// does not exist) is not retried for the whole timeout: it fails at once, naming the
// variable and the fix, as a refusal of input.
TEST(TcpStoreClientTest, AnUnresolvableMasterAddrFailsAtOnce) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> unknown =
      TcpStoreClient::Connect("no-such-host.invalid", 29500, {1, 2, ""}, absl::Minutes(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "retried for the whole timeout";
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
  EXPECT_THAT(unknown.status().message(),
              AllOf(HasSubstr("cannot resolve MASTER_ADDR \"no-such-host.invalid\""),
                    HasSubstr("name resolution failed for good"),
                    HasSubstr("set MASTER_ADDR to global rank 0's host name or IP address")));
}

// A rank waiting for the other members at the store when global rank 0 (and its store)
// ends: the store will not answer again, so the wait ends at once, saying so, instead of
// after the whole timeout with every rank named as never arrived.
TEST(TcpStoreClientTest, ARendezvousEndsAtOnceWhenTheStoreGoes) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0, {});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> waiter =
      TcpStoreClient::Connect("127.0.0.1", port, {}, absl::Seconds(20));
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> watcher =
      TcpStoreClient::Connect("127.0.0.1", port, {}, absl::Seconds(20));
  ASSERT_TRUE(waiter.ok() && watcher.ok());
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> device = CreateGlooDevice("127.0.0.1");
  ASSERT_TRUE(device.ok()) << device.status();
  auto rendezvous = std::async(std::launch::async, [&] {
    return GlooCommunicator::Create({"world[0,1]", {0, 1}, 0}, TcpRendezvous(*waiter), *device,
                                    absl::Seconds(20));
  });
  // Once rank 0 of the group has arrived (and so waits for rank 1), the store goes.
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       !(*watcher)->Get("world[0,1]/arrived_0").value_or(std::nullopt).has_value();) {
    ASSERT_LT(absl::Now(), give_up) << "rank 0 never arrived";
    absl::SleepFor(absl::Milliseconds(1));
  }
  const absl::Time start = absl::Now();
  server->reset();
  const absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = rendezvous.get();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited out the 20 s timeout";
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnavailable) << comm.status();
  EXPECT_THAT(comm.status().message(),
              AllOf(HasSubstr("while waiting for the members to arrive: arrivals unknown: the "
                              "rendezvous store stopped answering"),
                    HasSubstr("lost the connection"), HasSubstr("did global rank 0 exit?")));
}

TEST_F(TcpStoreTest, GlooRendezvousNamesTheRankThatNeverCame) {
  GroupSpec world{"world[0,1]", {0, 1}, 0};
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> device = CreateGlooDevice("127.0.0.1");
  ASSERT_TRUE(device.ok()) << device.status();
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create(world, TcpRendezvous(client_a_), *device, absl::Milliseconds(300));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(comm.status().message(),
              AllOf(HasSubstr("TCP store 127.0.0.1:"),
                    HasSubstr("ranks that never arrived: group rank 1 (global rank 1)")));
}

}  // namespace
}  // namespace conveyor
