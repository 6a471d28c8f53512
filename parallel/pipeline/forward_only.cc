#include "parallel/pipeline/forward_only.h"

namespace conveyor {
namespace pipeline {

std::vector<Action> ForwardOnlyActions(const PipelinePlace& place, int M) {
  const StageLayout layout = place.layout;
  const int P = place.num_ranks;
  const int rank = place.rank;
  const int stages = place.num_stages();
  std::vector<Action> actions;
  for (int m = 0; m < M; ++m) {
    for (int s = 0; s < stages; ++s) {
      const StageOwner owner = OwnerOfStage(layout, P, s);
      if (owner.rank != rank) continue;
      if (s > 0) {
        const int from = OwnerOfStage(layout, P, s - 1).rank;
        if (from != rank) actions.push_back({ActionType::kRecvForward, m, owner.chunk, from});
      }
      actions.push_back(Forward(m, owner.chunk));
      if (s + 1 < stages) {
        const int to = OwnerOfStage(layout, P, s + 1).rank;
        if (to != rank) actions.push_back({ActionType::kSendForward, m, owner.chunk, to});
      }
    }
  }
  return actions;
}

}  // namespace pipeline
}  // namespace conveyor
