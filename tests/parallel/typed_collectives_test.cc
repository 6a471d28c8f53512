// The typed collectives (parallel/communicator.h) on gloo (2 and 3 forked ranks: 3 splits
// an all-reduce unevenly) and on the in-process test world: fp32, bf16, fp64 and
// integer messages against references computed here, the in-place forms, bf16 moving
// as 2 bytes an element, and the arguments every backend refuses.
//
// The bf16 reference is written independently of runtime/dtype.h: the fp32 rank-order
// sum rounded to 8 significant bits with std::nearbyint (ties to even in the default
// rounding mode), not by the bit manipulation the communicator uses.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/status_macros.h"
#include "parallel/communicator.h"
#include "parallel/launcher.h"
#include "parallel/self_communicator.h"
#include "tests/parallel/multi_rank.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using testing_util::ConnectWorld;
using testing_util::FreshDir;
using testing_util::InProcessWorld;
using testing_util::ReadFile;
using testing_util::WriteFile;

// Elements after each output buffer that no operation may touch: a bf16 message moved
// as 4 bytes an element would overwrite them.
constexpr int kGuard = 8;
constexpr uint16_t kGuardBits = 0x7fc1;  // a NaN pattern no result has

// Inexact values of mixed magnitude, so that order and rounding show in the bits.
float Value(int rank, int64_t i) {
  return static_cast<float>(std::sin(0.37 * i + 1.3 * rank) * std::pow(2.0, i % 9 - 4));
}

// The bf16 bits of a float that bf16 represents exactly (x's upper half).
uint16_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return static_cast<uint16_t>(u >> 16);
}
float FromBits(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Round to 8 significant bits, ties to even (normal numbers and zero).
float RoundToBf16(float x) {
  if (x == 0.0f) return x;
  int exponent;
  std::frexp(x, &exponent);  // x = m * 2^exponent, 0.5 <= |m| < 1
  const double spacing = std::ldexp(1.0, exponent - 8);
  return static_cast<float>(std::nearbyint(x / spacing) * spacing);
}

// Rank r's bf16 contribution: Value rounded to bf16.
float Bf16Value(int rank, int64_t i) { return RoundToBf16(Value(rank, i)); }

// Reference bf16 sum: fp32 additions in rank order, one rounding at the end.
float Bf16Sum(int size, int64_t i) {
  float sum = Bf16Value(0, i);
  for (int r = 1; r < size; ++r) sum += Bf16Value(r, i);
  return RoundToBf16(sum);
}

float Fp32Sum(int size, int64_t i) {
  float sum = Value(0, i);
  for (int r = 1; r < size; ++r) sum += Value(r, i);
  return sum;
}

// `n` bf16 elements (as bits) followed by the guard.
std::vector<uint16_t> Bf16Buffer(int64_t n, int rank) {
  std::vector<uint16_t> b(n + kGuard, kGuardBits);
  for (int64_t i = 0; i < n; ++i) b[i] = Bits(Bf16Value(rank, i));
  return b;
}
Buffer Bf16(std::vector<uint16_t>& b, int64_t n) {
  return Buffer(b.data(), n, DType::kBFloat16, MemoryKind::kHost);
}
bool GuardIntact(const std::vector<uint16_t>& b, int64_t n) {
  for (size_t i = n; i < b.size(); ++i) {
    if (b[i] != kGuardBits) return false;
  }
  return true;
}

#define RETURN_IF_NOT_OK(expr)                                     \
  do {                                                             \
    const absl::Status _s = (expr);                                \
    if (!_s.ok()) return absl::StrCat(#expr, ": ", _s.ToString()); \
  } while (0)
#define EXPECT_OR_RETURN(cond, message) \
  do {                                  \
    if (!(cond)) return message;        \
  } while (0)

// Every typed operation on `comm`; "" when all match the references, else what did not.
// `bf16_sum_bits` receives this rank's bf16 all-reduce result, for comparing across ranks.
std::string CheckTypedCollectives(Communicator& comm, std::string* bf16_sum_bits) {
  const int s = comm.size(), me = comm.rank();
  {  // bf16 all-reduce over an uneven split, in place.
    const int64_t n = 1001;
    std::vector<uint16_t> data = Bf16Buffer(n, me);
    RETURN_IF_NOT_OK(comm.AllReduceSum(Bf16(data, n)));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_OR_RETURN(data[i] == Bits(Bf16Sum(s, i)),
                       absl::StrFormat("bf16 AllReduceSum element %d: %g, reference %g", i,
                                       FromBits(data[i]), Bf16Sum(s, i)));
    }
    EXPECT_OR_RETURN(GuardIntact(data, n), "bf16 AllReduceSum wrote past its buffer");
    bf16_sum_bits->assign(reinterpret_cast<const char*>(data.data()), n * sizeof(uint16_t));
  }
  {  // bf16 reduce-scatter, out of place and in place (this rank's slot of `in`).
    const int64_t k = 37;
    std::vector<uint16_t> in = Bf16Buffer(s * k, me), out(k + kGuard, kGuardBits);
    RETURN_IF_NOT_OK(comm.ReduceScatterSum(Bf16(in, s * k), Bf16(out, k)));
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_OR_RETURN(out[i] == Bits(Bf16Sum(s, me * k + i)), "bf16 ReduceScatterSum wrong");
    }
    EXPECT_OR_RETURN(GuardIntact(out, k), "bf16 ReduceScatterSum wrote past its output");
    const Buffer whole = Bf16(in, s * k);
    RETURN_IF_NOT_OK(comm.ReduceScatterSum(whole, whole.Slice(me * k, k)));
    EXPECT_OR_RETURN(std::memcmp(in.data() + me * k, out.data(), k * 2) == 0,
                     "in-place bf16 ReduceScatterSum differs from out of place");
  }
  {  // fp32 reduce-scatter in place, then an in-place all-gather: the all-reduce.
    const int64_t k = 29;
    std::vector<float> buffer(s * k);
    for (int64_t i = 0; i < s * k; ++i) buffer[i] = Value(me, i);
    const Buffer whole = MakeBuffer(buffer.data(), s * k);
    RETURN_IF_NOT_OK(comm.ReduceScatterSum(whole, whole.Slice(me * k, k)));
    RETURN_IF_NOT_OK(comm.AllGather(whole.Slice(me * k, k), whole));
    for (int64_t i = 0; i < s * k; ++i) {
      EXPECT_OR_RETURN(buffer[i] == Fp32Sum(s, i), "in-place fp32 reduce-scatter + gather wrong");
    }
  }
  {  // bf16 all-gather, out of place and in place.
    const int64_t k = 13;
    std::vector<uint16_t> in = Bf16Buffer(k, me), out(s * k + kGuard, kGuardBits);
    RETURN_IF_NOT_OK(comm.AllGather(Bf16(in, k), Bf16(out, s * k)));
    for (int r = 0; r < s; ++r) {
      for (int64_t i = 0; i < k; ++i) {
        EXPECT_OR_RETURN(out[r * k + i] == Bits(Bf16Value(r, i)), "bf16 AllGather wrong");
      }
    }
    EXPECT_OR_RETURN(GuardIntact(out, s * k), "bf16 AllGather wrote past its output");
    std::vector<uint16_t> in_place(s * k, 0);
    std::memcpy(in_place.data() + me * k, in.data(), k * 2);
    const Buffer whole = Bf16(in_place, s * k);
    RETURN_IF_NOT_OK(comm.AllGather(whole.Slice(me * k, k), whole));
    EXPECT_OR_RETURN(std::memcmp(in_place.data(), out.data(), s * k * 2) == 0,
                     "in-place bf16 AllGather differs");
  }
  {  // Integers and fp64 gather exactly; a broadcast of int64.
    std::vector<int32_t> ints(s);
    const int32_t mine32 = -1000 * me - 7;
    RETURN_IF_NOT_OK(comm.AllGather(MakeBuffer(&mine32, 1), MakeBuffer(ints.data(), s)));
    std::vector<int64_t> longs(s);
    const int64_t mine64 = (int64_t{1} << 40) + me;
    RETURN_IF_NOT_OK(comm.AllGather(MakeBuffer(&mine64, 1), MakeBuffer(longs.data(), s)));
    for (int r = 0; r < s; ++r) {
      EXPECT_OR_RETURN(ints[r] == -1000 * r - 7 && longs[r] == (int64_t{1} << 40) + r,
                       "integer AllGather wrong");
    }
    int64_t word = me == s - 1 ? -(int64_t{1} << 50) : 0;
    RETURN_IF_NOT_OK(comm.Broadcast(MakeBuffer(&word, 1), s - 1));
    EXPECT_OR_RETURN(word == -(int64_t{1} << 50), "int64 Broadcast wrong");
    std::vector<double> d = {0.1 * me, me == 0 ? std::nan("") : 1.0};
    RETURN_IF_NOT_OK(comm.AllReduceMax(MakeBuffer(d.data(), 2)));
    EXPECT_OR_RETURN(d[0] == 0.1 * (s - 1) && std::isnan(d[1]), "fp64 AllReduceMax wrong");
  }
  {  // A ring of bf16 and int32 messages in one batch.
    const int next = (me + 1) % s, prev = (me + s - 1) % s;
    std::vector<uint16_t> send = Bf16Buffer(9, me), got(9 + kGuard, kGuardBits);
    int32_t tag = 100 + me, got_tag = 0;
    RETURN_IF_NOT_OK(comm.BatchSendRecv({{true, next, Bf16(send, 9)},
                                         {false, prev, Bf16(got, 9)},
                                         {true, next, MakeBuffer(&tag, 1)},
                                         {false, prev, MakeBuffer(&got_tag, 1)}}));
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_OR_RETURN(got[i] == Bits(Bf16Value(prev, i)), "bf16 BatchSendRecv wrong");
    }
    EXPECT_OR_RETURN(GuardIntact(got, 9) && got_tag == 100 + prev, "BatchSendRecv wrong");
  }
  return "";
}

// What every backend refuses before moving anything (the same on every rank, so no
// rank is left waiting): unsupported types, split types or memory kinds, memory it does
// not reach, counts that do not agree, overlaps other than the in-place slot.
std::string CheckRefusals(Communicator& comm) {
  const int s = comm.size(), me = comm.rank();
  std::vector<float> f(4 * s + 4);  // room for the misplaced slices below
  std::vector<int32_t> ints(4 * s);
  std::vector<uint16_t> half(4 * s);
  const Buffer floats = MakeBuffer(f.data(), 4 * s);
  const std::pair<absl::Status, std::string> cases[] = {
      {comm.AllReduceMax(floats), "fp32 elements are not supported; it takes fp64"},
      {comm.AllReduceSum(MakeBuffer(ints.data(), 4)), "int32 elements are not supported"},
      {comm.ReduceScatterSum(MakeBuffer(ints.data(), 4 * s), MakeBuffer(ints.data(), 4)),
       "int32 elements are not supported; it takes fp32, bf16"},
      {comm.AllGather(floats.Slice(0, 4), Bf16(half, 4 * s)), "hold fp32 and bf16 elements"},
      {comm.AllGather(floats.Slice(0, 4), floats.Slice(0, 4 * s - 1)),
       absl::StrFormat("`out` holds %d elements, not %d ranks x 4", 4 * s - 1, s)},
      // Overlapping, but not as this rank's slot.
      {comm.AllGather(floats.Slice(me == 0 ? 1 : 0, 4), floats),
       "`in` overlaps `out` other than as its slot"},
      {comm.ReduceScatterSum(floats, floats.Slice(me == 0 ? 2 : 0, 4)),
       "`out` overlaps `in` other than as its slot"},
      {comm.AllReduceSum(MakeBuffer(f.data(), 4, MemoryKind::kDevice)),
       "declared in device memory, which this group's communicator does not move"},
      {comm.BatchSendRecv(
           {{true, 0, MakeBuffer(f.data(), 1, MemoryKind::kDevice)}, {false, 0, f.data() + 1, 1}}),
       "1 of its 2 buffers are declared in device memory"},
      {comm.AllReduceSum(Buffer(nullptr, 3, DType::kFloat32, MemoryKind::kHost)),
       "a buffer of 3 elements has no address"},
  };
  for (const auto& [status, expected] : cases) {
    if (status.code() != absl::StatusCode::kInvalidArgument ||
        status.message().find(expected) == absl::string_view::npos ||
        status.message().find(comm.name()) == absl::string_view::npos) {
      return absl::StrCat("expected InvalidArgument with \"", expected, "\", got ",
                          status.ToString());
    }
  }
  // Refusals leave the communicator usable.
  RETURN_IF_NOT_OK(comm.Barrier());
  return "";
}

class GlooTypedCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooTypedCollectivesTest, MatchTheReferencesOnEveryRank) {
  const int nproc = GetParam();
  const std::string dir = FreshDir(absl::StrCat("typed", nproc));
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      nproc,
      [&](const RankEnvironment& env) {
        auto comm = ConnectWorld(env, absl::Seconds(20));
        if (!comm.ok()) return testing_util::Fail(env, comm.status().ToString());
        std::string bits;
        std::string problem = CheckTypedCollectives(**comm, &bits);
        if (problem.empty()) problem = CheckRefusals(**comm);
        if (!problem.empty()) return testing_util::Fail(env, problem);
        WriteFile(absl::StrCat(dir, "/bf16_sum.", env.rank), bits);
        return 0;
      },
      err);
  ASSERT_EQ(code, 0) << err.str();
  const std::string rank0 = ReadFile(dir + "/bf16_sum.0");
  ASSERT_EQ(rank0.size(), 1001 * sizeof(uint16_t));
  for (int r = 1; r < nproc; ++r) {
    EXPECT_EQ(ReadFile(absl::StrCat(dir, "/bf16_sum.", r)), rank0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooTypedCollectivesTest, ::testing::Values(2, 3));

TEST(InProcessTypedCollectivesTest, MatchTheReferences) {
  InProcessWorld world(3);
  std::vector<std::string> bits(3);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& comm) {
    std::string problem = CheckTypedCollectives(comm, &bits[rank]);
    if (problem.empty()) problem = CheckRefusals(comm);
    return problem.empty() ? absl::OkStatus() : absl::InternalError(problem);
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  EXPECT_EQ(bits[1], bits[0]);
  EXPECT_EQ(bits[2], bits[0]);
}

TEST(SelfTypedCollectivesTest, CopiesEveryTypeAndRefusesAlike) {
  SelfCommunicator self("tp[0]");
  std::string bits;
  EXPECT_EQ(CheckTypedCollectives(self, &bits), "");
  EXPECT_EQ(CheckRefusals(self), "");
}

// What a rank sends, in bytes of the messages' element types, as a ring sends them;
// refused operations send nothing. A single rank's collectives send nothing.
TEST(MessageBytesTest, CountsWhatARingSendsInTheMessagesTypes) {
  SelfCommunicator self("dp[0]");
  std::vector<uint16_t> half = Bf16Buffer(12, 0);
  std::vector<float> floats(12, 1.0f), received(3);
  EXPECT_TRUE(self.AllReduceSum(Bf16(half, 12)).ok());
  EXPECT_TRUE(self.AllGather(Bf16(half, 4), Bf16(half, 4)).ok());  // in place
  EXPECT_EQ(self.message_bytes(), 0);
  EXPECT_TRUE(
      self.BatchSendRecv({{true, 0, floats.data(), 3}, {false, 0, received.data(), 3}}).ok());
  EXPECT_EQ(self.message_bytes(), 12);  // the send only
  EXPECT_FALSE(self.AllReduceMax(MakeBuffer(floats.data(), 10)).ok());
  EXPECT_EQ(self.message_bytes(), 12);

  testing_util::InProcessWorld world(3);
  std::vector<int64_t> sent(3);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& comm) -> absl::Status {
    std::vector<uint16_t> bf16 = Bf16Buffer(12, rank);
    std::vector<float> fp32(12, 1.0f);
    RETURN_IF_ERROR(comm.AllReduceSum(Bf16(bf16, 12)));  // 2 * 24 * 2/3 = 32
    RETURN_IF_ERROR(comm.AllReduceSum(fp32.data(), 12));  // 2 * 48 * 2/3 = 64
    RETURN_IF_ERROR(comm.ReduceScatterSum(fp32.data(), 4, fp32.data() + 4 * rank));  // 32
    const Buffer all = Bf16(bf16, 12);
    RETURN_IF_ERROR(comm.AllGather(all.Slice(4 * rank, 4), all));  // 8 to 2 ranks = 16
    sent[rank] = comm.message_bytes();
    return absl::OkStatus();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(sent[r], 32 + 64 + 32 + 16) << "rank " << r;
  }
}

}  // namespace
}  // namespace conveyor
