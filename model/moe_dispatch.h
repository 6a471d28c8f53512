// Where each token goes in a mixture-of-experts layer on one rank: the routing slots
// (token t's j-th pick, [tokens, topk]) that survive the experts' capacity, laid out as
// the rows of one permuted tensor, expert by expert and, within an expert, in token order
// (Megatron's permute over the routing map).
#ifndef CONVEYOR_MODEL_MOE_DISPATCH_H_
#define CONVEYOR_MODEL_MOE_DISPATCH_H_

#include <cstdint>
#include <vector>

namespace conveyor {

struct DispatchPlan {
  std::vector<int64_t> expert_begin;  // [experts + 1]: expert e has rows [begin[e], begin[e+1])
  std::vector<int32_t> token_of_row;  // [rows]: the token, or -1 for a padding row
  std::vector<int32_t> slot_of_row;   // [rows]: the slot, or -1 for a padding row
  std::vector<int32_t> row_of_slot;   // [tokens * topk]: the row, or -1 for a dropped slot

  int64_t rows() const { return static_cast<int64_t>(token_of_row.size()); }
  int64_t expert_rows(int64_t e) const { return expert_begin[e + 1] - expert_begin[e]; }
  // Dispatched tokens per expert, padding excluded.
  std::vector<int64_t> TokensPerExpert() const;
};

// `slot_expert` [tokens * topk] is each slot's expert and `keep` ([tokens * topk] or
// empty: keep all) whether its expert kept it. With `pad_rows` > 0 every expert gets
// exactly that many rows, its kept tokens first and zero rows after
// (--moe-pad-expert-input-to-capacity); no expert may keep more than pad_rows.
DispatchPlan PlanDispatch(const std::vector<int32_t>& slot_expert, const std::vector<uint8_t>& keep,
                          int64_t topk, int64_t experts, int64_t pad_rows);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_DISPATCH_H_
