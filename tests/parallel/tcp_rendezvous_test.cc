// The TCP rendezvous (parallel/tcp_rendezvous.h, tcp_store_server.h): the store global
// rank 0 serves when the ranks share no directory. Keys cross clients and stay within
// their group, waits end in a timeout that names the missing keys, progress boards
// read every rank's latest post, failures name MASTER_ADDR/MASTER_PORT, and a gloo
// rendezvous over it names the rank that never came. The multi-process run of every
// process group over the TCP store is in parallel_state_test.
#include "parallel/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/gloo_communicator.h"
#include "parallel/tcp_store_server.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_a_ = Connect("127.0.0.1");
    client_b_ = Connect("localhost");  // the server takes IPv4 and IPv6 alike
  }

  std::shared_ptr<TcpStoreClient> Connect(const std::string& host) {
    absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
        TcpStoreClient::Connect(host, server_->port(), absl::Seconds(5));
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
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> first = TcpStoreServer::Start(0);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> second = TcpStoreServer::Start((*first)->port());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on MASTER_PORT ", (*first)->port())));
}

TEST(TcpStoreClientTest, ConnectGivesUpNamingTheAddress) {
  int port = 0;
  {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> gone = TcpStoreServer::Start(0);
    ASSERT_TRUE(gone.ok()) << gone.status();
    port = (*gone)->port();
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> refused =
      TcpStoreClient::Connect("127.0.0.1", port, absl::Milliseconds(300));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));  // it kept trying
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr(absl::StrCat("MASTER_ADDR:MASTER_PORT = 127.0.0.1:", port)),
                    HasSubstr("global rank 0")));
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> unknown =
      TcpStoreClient::Connect("no-such-host.invalid", port, absl::Milliseconds(100));
  EXPECT_THAT(unknown.status().message(), HasSubstr("cannot resolve MASTER_ADDR"));
}

TEST(TcpStoreClientTest, AStoreThatNeverAnswersEndsInAnErrorNotAHang) {
  // A listening socket nobody serves: connections complete (the backlog), requests
  // are never answered.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(silent, 4), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
  absl::StatusOr<std::shared_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", ntohs(address.sin_port), absl::Milliseconds(200));
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::optional<std::string>> value = (*client)->Get("tp[0,1]/rank_0");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(value.status().message(), HasSubstr("no answer within 200ms"));
  ::close(silent);
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
