// Save under one layout, load under another (docs/design.md §3): tensor
// parallelism (column, row, vocab and SwiGLU's two-range shards), data parallelism,
// and the distributed optimizer's flat slices, in every direction.
#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"

namespace conveyor {
namespace {

using testing_util::BlockRuns;
using testing_util::CountWrong;
using testing_util::EmptyShard;
using testing_util::FilledShard;
using testing_util::FreshDir;
using testing_util::InProcessWorld;
using testing_util::LocalShard;
using testing_util::Refs;
using testing_util::SwigluRuns;

enum class Split { kColumn, kRow, kSwiglu, kReplicated };

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  Split split;
};

// A one-layer GPT with SwiGLU, shaped so that TP 1, 2 and 4 divide everything.
const std::vector<Spec>& Model() {
  static const auto* model = new std::vector<Spec>{
      {"embedding.word_embeddings.weight", {16, 8}, Split::kColumn},  // vocab-parallel
      {"layers.0.attention.qkv.weight", {24, 8}, Split::kColumn},
      {"layers.0.attention.qkv.bias", {24}, Split::kColumn},
      {"layers.0.attention.proj.weight", {8, 8}, Split::kRow},
      {"layers.0.attention.proj.bias", {8}, Split::kReplicated},
      {"layers.0.mlp.fc1.weight", {32, 8}, Split::kSwiglu},
      {"layers.0.mlp.fc1.bias", {32}, Split::kSwiglu},
      {"layers.0.mlp.fc2.weight", {8, 16}, Split::kRow},
      {"layers.0.norm.weight", {8}, Split::kReplicated},
  };
  return *model;
}

struct Layout {
  int tp;
  int dp;
  bool distributed_optimizer;
  int world() const { return tp * dp; }
};

std::string Describe(const Layout& l) {
  return "TP" + std::to_string(l.tp) + "xDP" + std::to_string(l.dp) +
         (l.distributed_optimizer ? "distopt" : "");
}

std::vector<IndexRun> TpRuns(const Spec& s, int tp, int tp_rank) {
  switch (s.split) {
    case Split::kColumn:
      return BlockRuns(s.shape, 0, tp, tp_rank);
    case Split::kRow:
      return BlockRuns(s.shape, 1, tp, tp_rank);
    case Split::kSwiglu:
      return SwigluRuns(s.shape, tp, tp_rank);
    case Split::kReplicated:
      return ElementRange(0, NumElements(s.shape));
  }
  return {};
}

constexpr char kExpAvg[] = "optimizer.exp_avg/";

// The shards world rank `rank` holds (Megatron order: TP ranks adjacent). With
// `writers_only`, only those it must save: one holder of each element.
std::vector<LocalShard> RankShards(const Layout& l, int rank, bool writers_only, bool fill) {
  const int tp_rank = rank % l.tp, dp_rank = rank / l.tp;
  const auto make = [fill](const std::string& name, const std::vector<int64_t>& shape,
                           std::vector<IndexRun> runs) {
    return fill ? FilledShard(name, shape, std::move(runs))
                : EmptyShard(name, shape, std::move(runs));
  };
  std::vector<LocalShard> out;
  // Parameters: DP rank 0 saves; replicated-over-TP ones on TP rank 0 only.
  for (const Spec& s : Model()) {
    const bool replica = dp_rank != 0 || (s.split == Split::kReplicated && tp_rank != 0);
    if (writers_only && replica) continue;
    out.push_back(make(s.name, s.shape, TpRuns(s, l.tp, tp_rank)));
  }
  // Optimizer state in each parameter's global index space.
  if (!l.distributed_optimizer) {
    for (const Spec& s : Model()) {
      const bool replica = dp_rank != 0 || (s.split == Split::kReplicated && tp_rank != 0);
      if (writers_only && replica) continue;
      out.push_back(make(kExpAvg + s.name, s.shape, TpRuns(s, l.tp, tp_rank)));
    }
    return out;
  }
  // Distributed optimizer: this DP rank owns [begin, end) of the flat concatenation of
  // the TP rank's local parameters; its part of each parameter is a slice of that
  // parameter's local runs.
  int64_t total = 0;
  for (const Spec& s : Model()) total += CountElements(TpRuns(s, l.tp, tp_rank));
  const int64_t begin = total * dp_rank / l.dp, end = total * (dp_rank + 1) / l.dp;
  int64_t offset = 0;
  for (const Spec& s : Model()) {
    const std::vector<IndexRun> runs = TpRuns(s, l.tp, tp_rank);
    const int64_t n = CountElements(runs);
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + n);
    const bool replica = s.split == Split::kReplicated && tp_rank != 0;
    if (lo < hi && !(writers_only && replica)) {
      out.push_back(make(kExpAvg + s.name, s.shape, SliceRuns(runs, lo - offset, hi - offset)));
    }
    offset += n;
  }
  return out;
}

CheckpointState State(const Layout& l) {
  CheckpointState state;
  state.iteration = 100;
  state.consumed_samples = 3200;
  state.layout.set_tensor_model_parallel_size(l.tp);
  state.layout.set_data_parallel_size(l.dp);
  state.layout.set_use_distributed_optimizer(l.distributed_optimizer);
  return state;
}

void SaveUnder(const Layout& l, const std::string& dir) {
  InProcessWorld world(l.world());
  const std::vector<absl::Status> results = world.Run([&](int rank, Communicator& comm) {
    std::vector<LocalShard> shards = RankShards(l, rank, /*writers_only=*/true, /*fill=*/true);
    return SaveCheckpoint(dir, State(l), Refs(shards), comm);
  });
  for (int r = 0; r < l.world(); ++r)
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

void ExpectLoadsUnder(const Layout& l, const std::string& dir) {
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  for (int rank = 0; rank < l.world(); ++rank) {
    std::vector<LocalShard> shards = RankShards(l, rank, /*writers_only=*/false, /*fill=*/false);
    const absl::Status status = LoadTensors(*ckpt, Refs(shards));
    ASSERT_TRUE(status.ok()) << Describe(l) << " rank " << rank << ": " << status;
    for (const LocalShard& s : shards) {
      EXPECT_EQ(CountWrong(s), 0) << Describe(l) << " rank " << rank << " " << s.name;
    }
  }
}

class ReshardTest : public ::testing::TestWithParam<std::pair<Layout, Layout>> {};

TEST_P(ReshardTest, EveryElementLandsWhereTheNewLayoutWantsIt) {
  const auto& [saved, loaded] = GetParam();
  const std::string dir = FreshDir("reshard");
  SaveUnder(saved, dir);
  ExpectLoadsUnder(loaded, dir);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ReshardTest,
    ::testing::Values(
        std::make_pair(Layout{2, 1, false}, Layout{1, 1, false}),   // TP2 -> TP1
        std::make_pair(Layout{1, 1, false}, Layout{4, 1, false}),   // TP1 -> TP4
        std::make_pair(Layout{4, 1, false}, Layout{2, 1, false}),   // TP4 -> TP2
        std::make_pair(Layout{2, 2, true}, Layout{1, 1, false}),    // dist-opt -> one rank
        std::make_pair(Layout{1, 1, false}, Layout{2, 3, true}),    // one rank -> dist-opt
        std::make_pair(Layout{2, 2, true}, Layout{4, 3, true}),     // dist-opt, uneven DP
        std::make_pair(Layout{2, 2, false}, Layout{2, 2, false})),  // same layout
    [](const auto& test) {
      return Describe(test.param.first) + "_to_" + Describe(test.param.second);
    });

TEST(ReshardManifestTest, RecordsAreCompactAndNameTheirWriters) {
  const std::string dir = FreshDir("compact");
  SaveUnder(Layout{2, 2, false}, dir);
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->manifest().layout().world_size(), 4);
  EXPECT_EQ(ckpt->manifest().layout().tensor_model_parallel_size(), 2);

  // A row-parallel shard is one strided run, written by the DP-rank-0 TP ranks 0, 1.
  const TensorRecord* fc2 = ckpt->FindTensor("layers.0.mlp.fc2.weight");
  ASSERT_NE(fc2, nullptr);
  ASSERT_EQ(fc2->shards_size(), 2);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(fc2->shards(k).writer_rank(), k);
    EXPECT_EQ(fc2->shards(k).file(), k == 0 ? "rank_00000.bin" : "rank_00001.bin");
    ASSERT_EQ(fc2->shards(k).runs_size(), 1);
    EXPECT_EQ(fc2->shards(k).runs(0).count(), 8);
    EXPECT_EQ(fc2->shards(k).runs(0).stride(), 16);
  }
  // SwiGLU's fc1 on TP rank 1: gate rows 8-15 and up rows 24-31, equal blocks 16
  // rows apart, so one strided run.
  const ShardRecord& fc1 = ckpt->FindTensor("layers.0.mlp.fc1.weight")->shards(1);
  ASSERT_EQ(fc1.runs_size(), 1);
  EXPECT_EQ(fc1.runs(0).start(), 8 * 8);
  EXPECT_EQ(fc1.runs(0).length(), 8 * 8);
  EXPECT_EQ(fc1.runs(0).count(), 2);
  EXPECT_EQ(fc1.runs(0).stride(), 16 * 8);
  // A TP-replicated tensor is stored once.
  EXPECT_EQ(ckpt->FindTensor("layers.0.norm.weight")->shards_size(), 1);
}

}  // namespace
}  // namespace conveyor
