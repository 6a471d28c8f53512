// One step of a pipeline schedule on one rank (docs/design.md §2: schedules are
// data). A rank's schedule is a list of these, run in order: compute on one model chunk
// for one micro-batch, or one side of a point-to-point transfer. Consecutive p2p actions
// form one batch that is posted together and waited on together, as Megatron's
// batch_isend_irecv does; the simulator and the executor both follow that rule.
#ifndef CONVEYOR_PARALLEL_PIPELINE_ACTION_H_
#define CONVEYOR_PARALLEL_PIPELINE_ACTION_H_

#include <string>
#include <vector>

namespace conveyor {
namespace pipeline {

enum class ActionType {
  kForward,
  kBackwardInput,   // B: gradient w.r.t. the chunk's input, what the previous stage waits for
  kBackwardWeight,  // W: gradient w.r.t. the chunk's weights, free to run later
  kBackward,        // B and W fused, what schedules without a zero-bubble split run
  kSendForward,     // activation of F(micro_batch, chunk) to the next stage's rank
  kRecvForward,     // input of F(micro_batch, chunk) from the previous stage's rank
  kSendBackward,    // input gradient of B(micro_batch, chunk) to the previous stage's rank
  kRecvBackward,    // output gradient for B(micro_batch, chunk) from the next stage's rank
};

struct Action {
  ActionType type = ActionType::kForward;
  int micro_batch = 0;
  // Model chunk local to the rank, 0..V-1; see GlobalStage for where it sits.
  int chunk = 0;
  // The other rank of a send or receive; -1 for compute.
  int peer = -1;

  bool operator==(const Action& other) const {
    return type == other.type && micro_batch == other.micro_batch && chunk == other.chunk &&
           peer == other.peer;
  }
  bool operator!=(const Action& other) const { return !(*this == other); }
};

inline Action Forward(int micro_batch, int chunk = 0) {
  return {ActionType::kForward, micro_batch, chunk, -1};
}
inline Action BackwardInput(int micro_batch, int chunk = 0) {
  return {ActionType::kBackwardInput, micro_batch, chunk, -1};
}
inline Action BackwardWeight(int micro_batch, int chunk = 0) {
  return {ActionType::kBackwardWeight, micro_batch, chunk, -1};
}
inline Action Backward(int micro_batch, int chunk = 0) {
  return {ActionType::kBackward, micro_batch, chunk, -1};
}

bool IsCompute(ActionType type);
inline bool IsCompute(const Action& action) { return IsCompute(action.type); }
inline bool IsP2p(const Action& action) { return !IsCompute(action.type); }
bool IsSend(ActionType type);
// Sends and receives of activations (forward direction) vs. of gradients.
bool IsForwardP2p(ActionType type);

// "F3", "B3" (input gradient), "W3", "BW3" (fused backward), with "c1" appended for
// chunk 1 and so on (chunk 0 prints bare). Transfers: "sF3>1" sends F3's activation to
// rank 1, "rF3<0" receives it from rank 0; "sB3>0" / "rB3<2" for gradients.
std::string ToString(const Action& action);
// Actions separated by single spaces.
std::string ToString(const std::vector<Action>& actions);

// Global pipeline stages, 0..V*P-1, data flows from stage s to s+1.
//   kLoop:   Megatron's interleaving: chunk c of rank r is stage c*P + r, so the data
//            loops over the ranks V times.
//   kVShape: V = 2, chunk 0 of rank r is stage r and chunk 1 is stage 2P-1-r, so the
//            data goes down the ranks and back up (zbv); rank P-1 hands over locally.
enum class StageLayout { kLoop, kVShape };

int GlobalStage(StageLayout layout, int num_ranks, int rank, int chunk);

struct StageOwner {
  int rank = 0;
  int chunk = 0;
};
StageOwner OwnerOfStage(StageLayout layout, int num_ranks, int stage);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_ACTION_H_
