#include "parallel/pipeline/executor.h"

#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "parallel/tensor_buffer.h"
#include "profiler/recorder.h"

namespace conveyor {
namespace pipeline {
namespace {

using Key = std::pair<int, int>;  // (micro-batch, chunk)

// The tensors in flight on this rank, keyed by the action that will consume them.
struct Mailboxes {
  std::map<Key, Tensor> forward_inputs;   // for F(mb, chunk)
  std::map<Key, Tensor> backward_grads;   // for B(mb, chunk)
  std::map<Key, Tensor> forward_outputs;  // from F(mb, chunk), to send
  std::map<Key, Tensor> input_grads;      // from B(mb, chunk), to send
};

// --profile (profiler/recorder.h): a span per compute action and per batch of
// transfers, named as ToString names the actions, only while recording.
std::string SpanName(absl::Span<const Action> actions) {
  if (!profiler::Recorder::Global().active()) return {};
  return absl::StrJoin(actions, " ",
                       [](std::string* out, const Action& a) { out->append(ToString(a)); });
}

Tensor Take(std::map<Key, Tensor>* box, const Key& key) {
  auto it = box->find(key);
  if (it == box->end()) return Tensor();
  Tensor t = std::move(it->second);
  box->erase(it);
  return t;
}

class Executor {
 public:
  Executor(const PipelinePlace& place, Communicator& pp, Stage& stage,
           std::vector<TimedAction>* timeline)
      : place_(place),
        pp_(pp),
        stage_(stage),
        timeline_(timeline),
        start_(std::chrono::steady_clock::now()) {}

  absl::Status Run(const std::vector<Action>& actions) {
    for (size_t i = 0; i < actions.size();) {
      if (IsCompute(actions[i])) {
        RETURN_IF_ERROR(Compute(actions[i]));
        ++i;
        continue;
      }
      size_t end = i;
      while (end < actions.size() && IsP2p(actions[end])) ++end;
      RETURN_IF_ERROR(Transfer(actions, i, end));
      i = end;
    }
    return absl::OkStatus();
  }

 private:
  int last_stage() const { return place_.num_stages() - 1; }
  double Now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // The neighbour stage on this rank, if any: its chunk, else -1.
  int LocalChunkOfStage(int stage) const {
    if (stage < 0 || stage > last_stage()) return -1;
    const StageOwner owner = OwnerOfStage(place_.layout, place_.num_ranks, stage);
    return owner.rank == place_.rank ? owner.chunk : -1;
  }

  absl::Status Compute(const Action& a) {
    const profiler::Scope span("pipeline", SpanName({a}));
    const double begin = Now();
    const Key key{a.micro_batch, a.chunk};
    const int stage = place_.GlobalStage(a.chunk);
    switch (a.type) {
      case ActionType::kForward: {
        ASSIGN_OR_RETURN(Tensor out,
                         stage_.Forward(a.micro_batch, a.chunk, Take(&boxes_.forward_inputs, key)));
        if (stage < last_stage()) {
          const int next = LocalChunkOfStage(stage + 1);
          if (next >= 0) {
            boxes_.forward_inputs[{a.micro_batch, next}] = std::move(out);
          } else {
            boxes_.forward_outputs[key] = std::move(out);
          }
        }
        break;
      }
      case ActionType::kBackwardInput:
      case ActionType::kBackward: {
        Tensor output_grad = Take(&boxes_.backward_grads, key);
        ASSIGN_OR_RETURN(
            Tensor grad,
            a.type == ActionType::kBackward
                ? stage_.Backward(a.micro_batch, a.chunk, std::move(output_grad))
                : stage_.BackwardInput(a.micro_batch, a.chunk, std::move(output_grad)));
        if (stage > 0) {
          const int previous = LocalChunkOfStage(stage - 1);
          if (previous >= 0) {
            boxes_.backward_grads[{a.micro_batch, previous}] = std::move(grad);
          } else {
            boxes_.input_grads[key] = std::move(grad);
          }
        }
        break;
      }
      case ActionType::kBackwardWeight:
        RETURN_IF_ERROR(stage_.BackwardWeight(a.micro_batch, a.chunk));
        break;
      default:
        return absl::InternalError("not a compute action: " + ToString(a));
    }
    if (timeline_ != nullptr) timeline_->push_back({a, begin, Now()});
    return absl::OkStatus();
  }

  absl::Status Transfer(const std::vector<Action>& actions, size_t begin_index, size_t end_index) {
    const profiler::Scope span("pipeline", SpanName(absl::MakeConstSpan(actions).subspan(
                                               begin_index, end_index - begin_index)));
    const double begin = Now();
    std::vector<Communicator::P2POp> ops;
    std::vector<Tensor> keep_alive;
    for (size_t i = begin_index; i < end_index; ++i) {
      const Action& a = actions[i];
      const Key key{a.micro_batch, a.chunk};
      Tensor t;
      switch (a.type) {
        case ActionType::kSendForward:
          t = Take(&boxes_.forward_outputs, key);
          break;
        case ActionType::kSendBackward:
          t = Take(&boxes_.input_grads, key);
          break;
        case ActionType::kRecvForward:
          t = ReceiveBuffer();
          boxes_.forward_inputs[key] = t;
          break;
        case ActionType::kRecvBackward:
          t = ReceiveBuffer();
          boxes_.backward_grads[key] = t;
          break;
        default:
          break;
      }
      if (t.empty()) {
        return absl::InternalError(absl::StrFormat(
            "pipeline rank %d: %s has nothing to send (its compute did not run first)", place_.rank,
            ToString(a)));
      }
      ops.push_back({IsSend(a.type), a.peer, TensorBuffer(t)});
      keep_alive.push_back(std::move(t));
    }
    RETURN_IF_ERROR(pp_.BatchSendRecv(ops));
    if (timeline_ != nullptr) {
      const double end = Now();
      for (size_t i = begin_index; i < end_index; ++i) {
        timeline_->push_back({actions[i], begin, end});
      }
    }
    return absl::OkStatus();
  }

  // Room for one received activation or gradient, in the boundary's dtype on the
  // stage's device; the transfer fills it whole.
  Tensor ReceiveBuffer() const {
    return Tensor::Uninitialized({stage_.BoundaryElements()}, MemoryCategory::kActivations,
                                 stage_.BoundaryDType(), stage_.device());
  }

  const PipelinePlace& place_;
  Communicator& pp_;
  pipeline::Stage& stage_;
  std::vector<TimedAction>* timeline_;
  std::chrono::steady_clock::time_point start_;
  Mailboxes boxes_;
};

}  // namespace

absl::Status RunActions(const std::vector<Action>& actions, const PipelinePlace& place,
                        Communicator& pp, Stage& stage, std::vector<TimedAction>* timeline) {
  Executor executor(place, pp, stage, timeline);
  return executor.Run(actions);
}

}  // namespace pipeline
}  // namespace conveyor
