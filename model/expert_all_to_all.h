// Expert parallelism's token exchange (Megatron's all-to-all token dispatcher), built on
// Communicator::BatchSendRecv over the expert-parallel group of EP ranks. With E experts,
// rank p of the group holds the E/EP experts [p * E/EP, (p + 1) * E/EP) (LocalExperts).
// A rank's dispatched rows are expert-major over all E experts (DispatchPlan), so the rows
// for rank p's experts are one contiguous block; the exchange sends each block to its
// rank, which then holds, from every source rank in rank order, that source's rows for
// each of its local experts. ExpertMajorOrder regroups them per local expert, keeping
// (source rank, token order) within an expert, so the result is deterministic. The way
// back (and backward) is the same exchange with the counts' roles swapped.
#ifndef CONVEYOR_MODEL_EXPERT_ALL_TO_ALL_H_
#define CONVEYOR_MODEL_EXPERT_ALL_TO_ALL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "parallel/communicator.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"

namespace conveyor {

// The experts rank `ep_rank` of `ep_size` holds: [first, first + count).
struct LocalExperts {
  int64_t first = 0;
  int64_t count = 0;
};
// Requires ep_size to divide experts.
LocalExperts LocalExpertsOf(int64_t experts, int ep_size, int ep_rank);

// What one exchange moves, in rows, over `ranks` ranks of `local_experts` (L = E/EP)
// experts each: `send[p * L + e]` rows for rank p's local expert e, and
// `receive[q * L + e]` rows from rank q for this rank's local expert e.
struct ExpertRowCounts {
  int ranks = 1;
  int local_experts = 0;
  std::vector<int64_t> send;
  std::vector<int64_t> receive;

  // Rows to (from) each rank: the sums over its L experts.
  std::vector<int64_t> SendRowsPerRank() const;
  std::vector<int64_t> ReceiveRowsPerRank() const;
  int64_t received() const;  // rows this rank's experts get
};

// Every rank posts its rows per expert (`rows_per_expert`, [E], E = L * ep.size()) and
// learns what the others send it: each pair of ranks swaps L host int64 counts. Every
// rank of `ep` must call.
absl::StatusOr<ExpertRowCounts> ExchangeExpertCounts(Communicator& ep,
                                                     const std::vector<int64_t>& rows_per_expert);

// Sends rows [offset_p, offset_p + send_rows[p]) of `in` ([sum send_rows, width]) to rank
// p and writes the rows from rank q at offset sum_{q' < q} receive_rows[q'] of `out`
// ([sum receive_rows, width], same dtype and device); this rank's own block is copied.
// Every rank of `ep` must call, with counts that match its peers'.
absl::Status AllToAllRows(Communicator& ep, const Ops& ops, const Tensor& in,
                          const std::vector<int64_t>& send_rows,
                          const std::vector<int64_t>& receive_rows, Tensor* out);

// For received rows laid out source-major ([source q][local expert e][row]), the source
// row of each row of the expert-major layout ([e][q][row]): gathering with it regroups the
// rows per local expert. `expert_begin` gets each local expert's first row (L + 1 entries).
std::vector<int32_t> ExpertMajorOrder(const ExpertRowCounts& counts,
                                      std::vector<int64_t>* expert_begin);

// The inverse permutation of `order`: gathering with it undoes a gather with `order`.
std::vector<int32_t> InverseOrder(const std::vector<int32_t>& order);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_EXPERT_ALL_TO_ALL_H_
