#include "parallel/pipeline/action.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace conveyor {
namespace pipeline {

bool IsCompute(ActionType type) {
  switch (type) {
    case ActionType::kForward:
    case ActionType::kBackwardInput:
    case ActionType::kBackwardWeight:
    case ActionType::kBackward:
      return true;
    default:
      return false;
  }
}

bool IsSend(ActionType type) {
  return type == ActionType::kSendForward || type == ActionType::kSendBackward;
}

bool IsForwardP2p(ActionType type) {
  return type == ActionType::kSendForward || type == ActionType::kRecvForward;
}

std::string ToString(const Action& action) {
  std::string label;
  switch (action.type) {
    case ActionType::kForward:
      label = "F";
      break;
    case ActionType::kBackwardInput:
      label = "B";
      break;
    case ActionType::kBackwardWeight:
      label = "W";
      break;
    case ActionType::kBackward:
      label = "BW";
      break;
    case ActionType::kSendForward:
      label = "sF";
      break;
    case ActionType::kRecvForward:
      label = "rF";
      break;
    case ActionType::kSendBackward:
      label = "sB";
      break;
    case ActionType::kRecvBackward:
      label = "rB";
      break;
  }
  absl::StrAppend(&label, action.micro_batch);
  if (action.chunk != 0) absl::StrAppend(&label, "c", action.chunk);
  if (!IsCompute(action)) {
    absl::StrAppend(&label, IsSend(action.type) ? ">" : "<", action.peer);
  }
  return label;
}

std::string ToString(const std::vector<Action>& actions) {
  return absl::StrJoin(
      actions, " ", [](std::string* out, const Action& action) { out->append(ToString(action)); });
}

int GlobalStage(StageLayout layout, int num_ranks, int rank, int chunk) {
  if (layout == StageLayout::kVShape && chunk % 2 == 1) {
    return (chunk + 1) * num_ranks - 1 - rank;
  }
  return chunk * num_ranks + rank;
}

StageOwner OwnerOfStage(StageLayout layout, int num_ranks, int stage) {
  const int chunk = stage / num_ranks;
  const int offset = stage % num_ranks;
  if (layout == StageLayout::kVShape && chunk % 2 == 1) {
    return {num_ranks - 1 - offset, chunk};
  }
  return {offset, chunk};
}

}  // namespace pipeline
}  // namespace conveyor
