#include "model/expert_all_to_all.h"

#include <algorithm>
#include <numeric>

#include "base/status_macros.h"
#include "parallel/tensor_buffer.h"

namespace conveyor {
namespace {

// [ranks * L] -> [ranks]: the sum over each rank's L experts.
std::vector<int64_t> SumPerRank(const std::vector<int64_t>& per_rank_and_expert, int ranks,
                                int local_experts) {
  std::vector<int64_t> rows(ranks, 0);
  for (size_t i = 0; i < per_rank_and_expert.size(); ++i) {
    rows[i / local_experts] += per_rank_and_expert[i];
  }
  return rows;
}

// Rows [first, first + n) of a [rows, width] tensor.
Tensor Rows(const Tensor& t, int64_t first, int64_t n) {
  const int64_t width = t.dim(1);
  return t.View(first * width, {n, width});
}

}  // namespace

LocalExperts LocalExpertsOf(int64_t experts, int ep_size, int ep_rank) {
  const int64_t per_rank = experts / ep_size;
  return {ep_rank * per_rank, per_rank};
}

std::vector<int64_t> ExpertRowCounts::SendRowsPerRank() const {
  return SumPerRank(send, ranks, local_experts);
}

std::vector<int64_t> ExpertRowCounts::ReceiveRowsPerRank() const {
  return SumPerRank(receive, ranks, local_experts);
}

int64_t ExpertRowCounts::received() const {
  return std::accumulate(receive.begin(), receive.end(), int64_t{0});
}

absl::StatusOr<ExpertRowCounts> ExchangeExpertCounts(Communicator& ep,
                                                     const std::vector<int64_t>& rows_per_expert) {
  ExpertRowCounts counts;
  counts.ranks = ep.size();
  counts.local_experts = static_cast<int>(rows_per_expert.size()) / ep.size();
  counts.send = rows_per_expert;
  counts.receive.assign(counts.send.size(), 0);
  const int L = counts.local_experts;
  std::vector<Communicator::P2POp> ops;
  for (int p = 0; p < ep.size(); ++p) {
    Buffer to(counts.send.data() + p * L, L, DType::kInt64, MemoryKind::kHost);
    Buffer from(counts.receive.data() + p * L, L, DType::kInt64, MemoryKind::kHost);
    if (p == ep.rank()) {  // this rank's own rows for its own experts
      std::copy(counts.send.begin() + p * L, counts.send.begin() + (p + 1) * L,
                counts.receive.begin() + p * L);
      continue;
    }
    ops.emplace_back(true, p, to);
    ops.emplace_back(false, p, from);
  }
  RETURN_IF_ERROR(ep.BatchSendRecv(ops)) << "exchanging the experts' row counts";
  return counts;
}

absl::Status AllToAllRows(Communicator& ep, const Ops& ops, const Tensor& in,
                          const std::vector<int64_t>& send_rows,
                          const std::vector<int64_t>& receive_rows, Tensor* out) {
  std::vector<Communicator::P2POp> messages;
  std::vector<Tensor> blocks;  // the views the messages point into
  blocks.reserve(2 * send_rows.size());
  int64_t send_at = 0, receive_at = 0;
  for (int p = 0; p < ep.size(); ++p) {
    const int64_t n_send = send_rows[p], n_receive = receive_rows[p];
    if (p == ep.rank()) {
      if (n_send > 0) {
        Tensor mine = Rows(*out, receive_at, n_receive);
        ops.CopyColumns(Rows(in, send_at, n_send), 0, in.dim(1), &mine, 0);
      }
    } else {
      if (n_send > 0) {
        blocks.push_back(Rows(in, send_at, n_send));
        messages.emplace_back(true, p, TensorBuffer(blocks.back()));
      }
      if (n_receive > 0) {
        blocks.push_back(Rows(*out, receive_at, n_receive));
        messages.emplace_back(false, p, TensorBuffer(blocks.back()));
      }
    }
    send_at += n_send;
    receive_at += n_receive;
  }
  RETURN_IF_ERROR(ep.BatchSendRecv(messages)) << "the experts' all-to-all of token rows";
  return absl::OkStatus();
}

std::vector<int32_t> ExpertMajorOrder(const ExpertRowCounts& counts,
                                      std::vector<int64_t>* expert_begin) {
  const int L = counts.local_experts;
  // Where each (source, expert) block starts in the source-major layout.
  std::vector<int64_t> source_major_start(counts.receive.size() + 1, 0);
  for (size_t i = 0; i < counts.receive.size(); ++i) {
    source_major_start[i + 1] = source_major_start[i] + counts.receive[i];
  }
  std::vector<int32_t> order;
  order.reserve(source_major_start.back());
  expert_begin->assign(1, 0);
  for (int e = 0; e < L; ++e) {
    for (int q = 0; q < counts.ranks; ++q) {
      const int64_t block = static_cast<int64_t>(q) * L + e;
      for (int64_t r = 0; r < counts.receive[block]; ++r) {
        order.push_back(static_cast<int32_t>(source_major_start[block] + r));
      }
    }
    expert_begin->push_back(static_cast<int64_t>(order.size()));
  }
  return order;
}

std::vector<int32_t> InverseOrder(const std::vector<int32_t>& order) {
  std::vector<int32_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int32_t>(i);
  return inverse;
}

}  // namespace conveyor
