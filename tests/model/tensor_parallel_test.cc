// The tensor-parallel region boundaries on bf16 activations: two ranks (threads of this
// process) exchange them as bf16, 2 bytes an element, and get bf16 back: the gathered
// rows exactly, and sums rounded once from the fp32 sum of the two bf16 inputs (the
// reference, computed here with std::nearbyint, not with the runtime's conversions).
#include "model/tensor_parallel.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_groups.h"
#include "tests/util/in_process_world.h"

namespace conveyor {
namespace {

constexpr int kRanks = 2;
constexpr int64_t kRows = 4, kWidth = 3;

// A value bf16 holds exactly (8 significant bits), different per rank and element.
float Value(int rank, int64_t i) {
  return std::ldexp(static_cast<float>(129 + 7 * i + 50 * rank), static_cast<int>(i % 5) - 8);
}

// Round to 8 significant bits, ties to even (the values here are normal, non-zero).
float RoundToBf16(float x) {
  int exponent;
  std::frexp(x, &exponent);
  const double spacing = std::ldexp(1.0, exponent - 8);
  return static_cast<float>(std::nearbyint(x / spacing) * spacing);
}

// bf16 is the upper half of an fp32: its bits, for exact values only.
uint16_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return static_cast<uint16_t>(u >> 16);
}

Tensor Bf16Rows(int rank, int64_t rows) {
  Tensor t = Tensor::Zeros({rows, kWidth}, MemoryCategory::kActivations, DType::kBFloat16);
  auto* bits = static_cast<uint16_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) bits[i] = Bits(Value(rank, i));
  return t;
}

std::vector<uint16_t> BitsOf(const Tensor& t) {
  const auto* bits = static_cast<const uint16_t*>(t.raw());
  return std::vector<uint16_t>(bits, bits + t.numel());
}

TEST(TensorParallelTest, Bf16TravelsAsBf16AndSumsRoundOnce) {
  testing_util::InProcessWorld world(kRanks);
  std::vector<std::vector<uint16_t>> gathered(kRanks), summed(kRanks), scattered(kRanks);
  std::vector<int64_t> bytes(kRanks);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& comm) {
    SingleRankGroups others;
    ModelGroups groups = others.groups();
    groups.tp = groups.etp = &comm;  // expert TP as large as TP is the TP group
    const TensorParallel sp(groups, /*sequence_parallel=*/true);
    const TensorParallel tp(groups, /*sequence_parallel=*/false);
    absl::StatusOr<Tensor> full = sp.EnterForward(Bf16Rows(rank, kRows / kRanks));  // gather
    if (!full.ok()) return full.status();
    absl::StatusOr<Tensor> sum = tp.ExitForward(Bf16Rows(rank, kRows));  // all-reduce
    if (!sum.ok()) return sum.status();
    absl::StatusOr<Tensor> shard = sp.ExitForward(Bf16Rows(rank, kRows));  // reduce-scatter
    if (!shard.ok()) return shard.status();
    for (const Tensor* t : {&*full, &*sum, &*shard}) {
      if (t->dtype() != DType::kBFloat16) return absl::InternalError("not bf16");
    }
    gathered[rank] = BitsOf(*full);
    summed[rank] = BitsOf(*sum);
    scattered[rank] = BitsOf(*shard);
    bytes[rank] = comm.message_bytes();
    return absl::OkStatus();
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(statuses[r].ok()) << statuses[r];

  const int64_t half = kRows / kRanks * kWidth;  // elements of one rank's rows
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(r);
    for (int64_t i = 0; i < kRows * kWidth; ++i) {
      EXPECT_EQ(gathered[r][i], Bits(Value(static_cast<int>(i / half), i % half)));
      EXPECT_EQ(summed[r][i], Bits(RoundToBf16(Value(0, i) + Value(1, i))));
    }
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_EQ(scattered[r][i],
                Bits(RoundToBf16(Value(0, r * half + i) + Value(1, r * half + i))));
    }
    // 2 bytes an element, as a ring sends them over 2 ranks: the gather's shard to the
    // other rank, half the all-reduce's rows twice, half the reduce-scatter's rows.
    EXPECT_EQ(bytes[r], 2 * (half + kRows * kWidth + kRows * kWidth / 2));
  }
}

}  // namespace
}  // namespace conveyor
