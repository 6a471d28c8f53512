// The routed experts of one mixture-of-experts layer on this rank, and how the rows
// dispatched to them get there. On one expert-parallel rank every expert is here and
// runs on its block of the rank's rows. Under expert parallelism (`ep` of EP ranks) this
// rank holds experts [p * E/EP, (p + 1) * E/EP) (LocalExpertsOf; parameter names keep
// the global index, `name`.E.fc1.weight, so checkpoints match a one-rank model's): its
// rows cross the expert-parallel group to their experts (expert_all_to_all.h), the local
// experts run on what every rank sent, regrouped per expert in (source rank, token order),
// and the outputs go back the same way. Backward mirrors forward; W runs on the local
// rows, so a local expert's weight gradient covers every rank's tokens routed to it.
#ifndef CONVEYOR_MODEL_ROUTED_EXPERTS_H_
#define CONVEYOR_MODEL_ROUTED_EXPERTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/expert_all_to_all.h"
#include "model/expert_mlp.h"
#include "model/expert_row_share.h"
#include "model/parameter.h"
#include "model/tensor_parallel.h"
#include "parallel/communicator.h"
#include "runtime/ops.h"

namespace conveyor {

// What the experts keep for one micro-batch between forward and W.
struct RoutedExpertsStash {
  RowShare share;                     // ETP < TP: the rows this rank runs
  ExpertRowCounts counts;             // EP > 1: the rows exchanged per rank and expert
  std::vector<int32_t> order;         // EP > 1: received rows -> local-expert-major rows
  std::vector<int64_t> expert_begin;  // [local experts + 1]: each one's rows in `input`
  Tensor input;                       // the local experts' input rows (for W)
  std::vector<ExpertStash> experts;
};

class RoutedExperts {
 public:
  // `experts` experts of width `ffn` named `name`.E (E global), sharded like ExpertMlp
  // over the expert-tensor-parallel group of tp.groups() and spread over its
  // expert-parallel group, whose size must divide `experts`. `ops` and the groups must
  // outlive this object.
  RoutedExperts(const Ops* ops, ParameterStore* store, const std::string& name, int64_t experts,
                int64_t hidden, int64_t ffn, bool swiglu, float init_std, float output_std,
                const TensorParallel& tp);

  const LocalExperts& local() const { return local_; }

  // `rows` [R, hidden] are this rank's dispatched rows, expert-major over all experts
  // (expert e's are [expert_begin[e], expert_begin[e + 1])) -> each row's expert output,
  // in the same layout (this TP rank's partial sum). Every rank of the expert-parallel
  // group must call.
  absl::StatusOr<Tensor> Forward(const Tensor& rows, const std::vector<int64_t>& expert_begin,
                                 RoutedExpertsStash* stash) const;
  // The outputs' gradient (Forward's output layout) -> the rows' gradient (its input
  // layout). Every rank of the expert-parallel group must call.
  absl::StatusOr<Tensor> BackwardInput(const Tensor& d_out, RoutedExpertsStash* stash) const;
  // Accumulates the local experts' weight gradients; empties the stash.
  void BackwardWeight(RoutedExpertsStash* stash);

  void AppendParameters(std::vector<Parameter*>* out) const;

 private:
  bool exchanges() const { return ep_->size() > 1; }
  // Forward and BackwardInput on the rows this rank runs (all of them unless ETP < TP).
  absl::StatusOr<Tensor> ForwardShare(const Tensor& rows, const std::vector<int64_t>& expert_begin,
                                      RoutedExpertsStash* stash) const;
  absl::StatusOr<Tensor> BackwardShare(const Tensor& d_out, RoutedExpertsStash* stash) const;
  // Rows `index` of t (-1: a zero row).
  Tensor Rows(const Tensor& t, absl::Span<const int32_t> index) const;
  // Sends each rank's block of `in` (this rank's rows, expert-major over all experts) to
  // that rank and regroups what arrives by local expert (stash.order); FromExperts undoes
  // both, giving back `rows` rows in `in`'s layout.
  absl::StatusOr<Tensor> ToExperts(const Tensor& in, const RoutedExpertsStash& stash) const;
  absl::StatusOr<Tensor> FromExperts(const Tensor& local, const RoutedExpertsStash& stash,
                                     int64_t rows) const;
  // Local expert e's rows of a local-expert-major tensor.
  Tensor LocalRows(const Tensor& t, int64_t e, const RoutedExpertsStash& stash) const;

  const Ops* ops_;
  Communicator* ep_;
  TensorParallel expert_tp_;  // the experts' shards' group (ETP)
  int row_parts_;             // TP / ETP
  int row_part_;              // this rank's part of each expert's rows
  int64_t hidden_;
  LocalExperts local_;
  std::vector<ExpertMlp> experts_;  // the local ones, in expert order
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_ROUTED_EXPERTS_H_
