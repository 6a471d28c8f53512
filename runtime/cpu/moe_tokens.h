// The token movement of a mixture-of-experts layer (one rank): tokens permuted into
// expert order, and the experts' outputs combined back per token with the routing weights.
// Rows are `width` wide. A routing slot (t, j) is token t's j-th pick; row_of_slot maps it
// to its row of the permuted tensor, or -1 when the slot was dropped (expert capacity).
//   PermuteTokens:   out[r] = w[r] * x[token_of_row[r]]     (0 where token_of_row[r] = -1:
//                                                            padding up to capacity)
//   UnpermuteTokens: out[t] = sum_j w[t, j] * permuted[row_of_slot[t, j]]
//   SlotDots:        out[t, j] = dy[t] . permuted[row_of_slot[t, j]]   (0 when dropped)
// A null weight array means weights of 1. UnpermuteTokens with weights 1 is also
// PermuteTokens' backward; PermuteTokens with the slots' weights is UnpermuteTokens'.
#ifndef CONVEYOR_RUNTIME_CPU_MOE_TOKENS_H_
#define CONVEYOR_RUNTIME_CPU_MOE_TOKENS_H_

#include <cstdint>

namespace conveyor::cpu {

void PermuteTokens(const float* x, int64_t width, const int32_t* token_of_row,
                   const float* row_weight, int64_t rows, float* out);

void UnpermuteTokens(const float* permuted, int64_t width, const int32_t* row_of_slot,
                     const float* slot_weight, int64_t tokens, int64_t topk, float* out);

void SlotDots(const float* dy, const float* permuted, int64_t width, const int32_t* row_of_slot,
              int64_t tokens, int64_t topk, float* out);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_MOE_TOKENS_H_
