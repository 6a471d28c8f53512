#include "model/moe_shape.h"

#include <algorithm>

namespace conveyor {

int64_t PaddedExpertRows(const MoeShape& moe, int64_t tokens) {
  if (!moe.drops_tokens() || !moe.pad_to_capacity) return 0;
  return std::min(tokens,
                  ExpertCapacity(tokens, moe.router.topk, moe.experts(), moe.capacity_factor));
}

}  // namespace conveyor
