#include "parallel/pipeline/action.h"

#include "gtest/gtest.h"

namespace conveyor {
namespace pipeline {
namespace {

TEST(ActionTest, ToStringNamesComputeAndTransfers) {
  EXPECT_EQ(ToString(Forward(3)), "F3");
  EXPECT_EQ(ToString(BackwardInput(3)), "B3");
  EXPECT_EQ(ToString(BackwardWeight(3)), "W3");
  EXPECT_EQ(ToString(Backward(3)), "BW3");
  EXPECT_EQ(ToString(Forward(3, 1)), "F3c1");
  EXPECT_EQ(ToString(Action{ActionType::kSendForward, 3, 1, 2}), "sF3c1>2");
  EXPECT_EQ(ToString(Action{ActionType::kRecvForward, 3, 0, 0}), "rF3<0");
  EXPECT_EQ(ToString(Action{ActionType::kSendBackward, 0, 0, 1}), "sB0>1");
  EXPECT_EQ(ToString(Action{ActionType::kRecvBackward, 7, 2, 3}), "rB7c2<3");
  EXPECT_EQ(ToString(std::vector<Action>{Forward(0), Backward(0)}), "F0 BW0");
}

TEST(ActionTest, LoopLayoutIsMegatronInterleaving) {
  // P = 4, V = 2: rank 1 holds stages 1 and 5.
  EXPECT_EQ(GlobalStage(StageLayout::kLoop, 4, 1, 0), 1);
  EXPECT_EQ(GlobalStage(StageLayout::kLoop, 4, 1, 1), 5);
  EXPECT_EQ(GlobalStage(StageLayout::kLoop, 4, 3, 1), 7);
}

TEST(ActionTest, VShapeGoesDownAndBackUp) {
  // P = 4: rank 0 holds stages 0 and 7, rank 3 holds 3 and 4.
  EXPECT_EQ(GlobalStage(StageLayout::kVShape, 4, 0, 0), 0);
  EXPECT_EQ(GlobalStage(StageLayout::kVShape, 4, 0, 1), 7);
  EXPECT_EQ(GlobalStage(StageLayout::kVShape, 4, 3, 0), 3);
  EXPECT_EQ(GlobalStage(StageLayout::kVShape, 4, 3, 1), 4);
}

TEST(ActionTest, OwnerOfStageInvertsGlobalStage) {
  for (StageLayout layout : {StageLayout::kLoop, StageLayout::kVShape}) {
    for (int P : {1, 2, 3, 4, 8}) {
      for (int rank = 0; rank < P; ++rank) {
        for (int chunk = 0; chunk < 2; ++chunk) {
          const StageOwner owner = OwnerOfStage(layout, P, GlobalStage(layout, P, rank, chunk));
          EXPECT_EQ(owner.rank, rank);
          EXPECT_EQ(owner.chunk, chunk);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pipeline
}  // namespace conveyor
