#include "model/moe_dispatch.h"

#include <cassert>
#include <cstddef>

namespace conveyor {

std::vector<int64_t> DispatchPlan::TokensPerExpert() const {
  std::vector<int64_t> counts(expert_begin.size() - 1, 0);
  for (std::size_t e = 0; e + 1 < expert_begin.size(); ++e) {
    for (int64_t r = expert_begin[e]; r < expert_begin[e + 1]; ++r) {
      counts[e] += token_of_row[r] >= 0;
    }
  }
  return counts;
}

DispatchPlan PlanDispatch(const std::vector<int32_t>& slot_expert, const std::vector<uint8_t>& keep,
                          int64_t topk, int64_t experts, int64_t pad_rows) {
  const int64_t slots = static_cast<int64_t>(slot_expert.size());
  std::vector<std::vector<int32_t>> by_expert(experts);
  for (int64_t slot = 0; slot < slots; ++slot) {  // slots in token order
    if (keep.empty() || keep[slot]) {
      by_expert[slot_expert[slot]].push_back(static_cast<int32_t>(slot));
    }
  }
  DispatchPlan plan;
  plan.row_of_slot.assign(slots, -1);
  plan.expert_begin.push_back(0);
  for (const std::vector<int32_t>& expert_slots : by_expert) {
    const int64_t rows = pad_rows > 0 ? pad_rows : static_cast<int64_t>(expert_slots.size());
    assert(static_cast<int64_t>(expert_slots.size()) <= rows);
    for (int64_t i = 0; i < rows; ++i) {
      const bool real = i < static_cast<int64_t>(expert_slots.size());
      const int32_t slot = real ? expert_slots[i] : -1;
      if (real) plan.row_of_slot[slot] = static_cast<int32_t>(plan.token_of_row.size());
      plan.token_of_row.push_back(real ? static_cast<int32_t>(slot / topk) : -1);
      plan.slot_of_row.push_back(slot);
    }
    plan.expert_begin.push_back(static_cast<int64_t>(plan.token_of_row.size()));
  }
  return plan;
}

}  // namespace conveyor
