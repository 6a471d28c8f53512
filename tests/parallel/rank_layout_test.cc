// The layout must match Megatron's initialize_model_parallel exactly, or checkpoints
// and rank maps would disagree with what Megatron users expect.
#include "parallel/rank_layout.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/group.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Groups = std::vector<std::vector<int>>;

// The layout of the size flags on `world` ranks (ResolveLayout), which must be valid.
ParallelSizes Sizes(int tp, int pp, int world, int cp = 1, int ep = 1, int etp = 0) {
  const absl::StatusOr<ParallelSizes> layout = ResolveLayout(tp, pp, world, cp, ep, etp);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.value_or(ParallelSizes());
}

// Megatron's parallel_state docstring: 16 GPUs, TP 2, PP 4 (so DP 2).
TEST(RankLayoutTest, MegatronDocstringExample) {
  EXPECT_EQ(AllGroups(GroupKind::kTensor, Sizes(2, 4, 16)),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kData, Sizes(2, 4, 16)),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kPipeline, Sizes(2, 4, 16)),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kModel, Sizes(2, 4, 16)),
            (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
  // First and last stage of each pipeline group.
  EXPECT_EQ(AllGroups(GroupKind::kEmbedding, Sizes(2, 4, 16)),
            (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kWorld, Sizes(2, 4, 16)).size(), 1u);
}

// 16 ranks, TP 2, CP 2, PP 2 (so DP 2), in Megatron's order tp-cp-dp-pp:
// rank = pp * 8 + dp * 4 + cp * 2 + tp.
TEST(RankLayoutTest, ContextParallelGroupsInMegatronOrder) {
  EXPECT_EQ(AllGroups(GroupKind::kTensor, Sizes(2, 2, 16, 2)),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kContext, Sizes(2, 2, 16, 2)),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kData, Sizes(2, 2, 16, 2)),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kDataContext, Sizes(2, 2, 16, 2)),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kPipeline, Sizes(2, 2, 16, 2)),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kModel, Sizes(2, 2, 16, 2)),
            (Groups{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}));
  const RankCoords c = CoordsOf(11, Sizes(2, 2, 16, 2));
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 1);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 1);
  for (int r = 0; r < 16; ++r)
    EXPECT_EQ(RankOf(CoordsOf(r, Sizes(2, 2, 16, 2)), Sizes(2, 2, 16, 2)), r);
  EXPECT_THAT(ResolveLayout(2, 1, 6, 2).status().message(),
              HasSubstr("--context-parallel-size (2)"));
  EXPECT_THAT(RankMap(1, 1, 4, 2), HasSubstr("rank  tp  cp  pp  dp\n"
                                             "   0   0   0   0   0\n"
                                             "   1   0   1   0   0\n"
                                             "   2   0   0   0   1\n"));
}

// Megatron's expert rank generator (order tp-ep-dp-pp, default expert TP = TP): with TP 2, PP 2
// and DP 4 (16 ranks, rank = pp*8 + dp*2 + tp), EP 2 pairs data-parallel ranks 0-1 and
// 2-3 of each stage and tensor slice; the expert-data-parallel groups join dp 0 with 2
// and 1 with 3.
TEST(RankLayoutTest, ExpertGroupsInMegatronOrder) {
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(2, 2, 16, 1, 2)),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(2, 2, 16, 1, 2)),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  // EP = DP: one expert-parallel group per stage and slice, expert data parallelism of one.
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(1, 1, 4, 1, 4)), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(1, 1, 4, 1, 4)), (Groups{{0}, {1}, {2}, {3}}));
  // EP = 1: every rank alone holds all experts, expert data parallelism is DP.
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(2, 1, 4)), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(2, 1, 4)), (Groups{{0, 2}, {1, 3}}));
  // Megatron folds CP into the experts' data x context ranks (rank = dp*2 + cp here).
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(1, 1, 8, 2, 4)),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(1, 1, 8, 2, 4)),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_THAT(ResolveLayout(2, 1, 12, 1, 4).status().message(),
              HasSubstr("--expert-model-parallel-size (4) must be at least 1 and divide the "
                        "data-parallel size x --context-parallel-size x "
                        "--tensor-model-parallel-size / --expert-tensor-parallel-size (6)"));
  EXPECT_FALSE(ResolveLayout(1, 1, 4, 1, 0).ok());
  EXPECT_TRUE(ResolveLayout(2, 2, 16, 1, 4).ok());
}

// --expert-tensor-parallel-size below TP (Megatron's generator with tp = ETP, order
// tp-ep-dp-pp over each stage's ranks). TP 2, ETP 1, DP 2: EP 2 pairs the two TP ranks.
// TP 4, ETP 2, EP 2, DP 2, PP 2 (rank = pp*8 + dp*4 + tp): within a stage, expert shards
// pair ranks (0, 1), expert-parallel ranks are 2 apart, expert-data ranks 4 apart.
TEST(RankLayoutTest, ExpertTensorParallelBelowTp) {
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(2, 1, 4, 1, 2, 1)), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(2, 1, 4, 1, 2, 1)), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertTensor, Sizes(2, 1, 4, 1, 2, 1)),
            (Groups{{0}, {1}, {2}, {3}}));
  // EP 1: whole experts on every rank, their gradients reduced over TP x DP.
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(2, 1, 4, 1, 1, 1)), (Groups{{0, 1, 2, 3}}));
  // EP 4 spans both TP and DP.
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(2, 1, 4, 1, 4, 1)), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpert, Sizes(4, 2, 16, 1, 2, 2)),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertData, Sizes(4, 2, 16, 1, 2, 2)),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(AllGroups(GroupKind::kExpertTensor, Sizes(4, 2, 16, 1, 2, 2)),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  // The default (0) and ETP = TP are the same layout.
  EXPECT_EQ(AllGroups(GroupKind::kExpertTensor, Sizes(2, 1, 4, 1, 2)),
            AllGroups(GroupKind::kTensor, Sizes(2, 1, 4)));
  EXPECT_TRUE(ResolveLayout(2, 1, 12, 1, 4, 1).ok());
  EXPECT_THAT(ResolveLayout(4, 1, 8, 1, 1, 3).status().message(),
              HasSubstr("--expert-tensor-parallel-size (3) must divide "
                        "--tensor-model-parallel-size (4)"));
}

TEST(RankLayoutTest, CoordsFollowTpThenDpThenPp) {
  // rank = pp * (TP * DP) + dp * TP + tp
  const RankCoords c = CoordsOf(13, Sizes(2, 4, 16));
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 3);
  for (int world : {1, 4, 8, 16}) {
    for (int tp : {1, 2, 4}) {
      for (int pp : {1, 2, 4}) {
        if (!ResolveLayout(tp, pp, world).ok()) continue;
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(RankOf(CoordsOf(r, Sizes(tp, pp, world)), Sizes(tp, pp, world)), r);
        }
      }
    }
  }
}

TEST(RankLayoutTest, EmbeddingGroupMembership) {
  EXPECT_THAT(GroupOf(GroupKind::kEmbedding, 13, Sizes(2, 4, 16)), ElementsAre(1, 13));
  EXPECT_TRUE(GroupOf(GroupKind::kEmbedding, 5, Sizes(2, 4, 16)).empty());  // middle stage
  // One stage: each rank is both first and last, alone in its group (as Megatron).
  EXPECT_THAT(GroupOf(GroupKind::kEmbedding, 3, Sizes(2, 1, 4)), ElementsAre(3));
}

TEST(RankLayoutTest, ValidateLayoutNamesTheFlags) {
  EXPECT_TRUE(ResolveLayout(2, 2, 8).ok());
  const absl::Status s = ResolveLayout(4, 1, 6).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--tensor-model-parallel-size (4)"));
  EXPECT_THAT(s.message(), HasSubstr("world size 6"));
  EXPECT_FALSE(ResolveLayout(0, 1, 4).ok());
}

TEST(RankLayoutTest, RankMapIsATable) {
  EXPECT_EQ(RankMap(2, 1, 4),
            "rank map: world 4 = TP 2 x PP 1 x DP 2 (rank = pp*4 + dp*2 + tp)\n"
            "rank  tp  pp  dp\n"
            "   0   0   0   0\n"
            "   1   1   0   0\n"
            "   2   0   0   1\n"
            "   3   1   0   1\n");
  EXPECT_THAT(RankMap(3, 1, 4), HasSubstr("not divisible"));
}

TEST(GroupTest, NamesListRanksCompactly) {
  EXPECT_EQ(GroupName("tp", {0, 1}), "tp[0,1]");
  EXPECT_EQ(GroupName("world", {0, 1, 2, 3, 4, 5, 6, 7}), "world[0-7]");
  EXPECT_EQ(GroupName("mp", {0, 1, 4, 5, 6, 9}), "mp[0,1,4-6,9]");
  GroupSpec spec{"pp[0,4,8,12]", {0, 4, 8, 12}, 1};
  EXPECT_EQ(DescribeGroup(spec), "group pp[0,4,8,12] (global ranks 0,4,8,12)");
}

}  // namespace
}  // namespace conveyor
