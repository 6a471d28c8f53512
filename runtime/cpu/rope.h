// Rotary position embedding (RoPE), Megatron's default "rotate half" form: the head
// vector is split into halves (x1, x2) and pair i is rotated by angle pos * f_i,
// f_i = base^(-2i/d) (or scaled, runtime/rope_scaling.h):
//   x1' = x1 cos - x2 sin,   x2' = x2 cos + x1 sin.
// The rotation is orthogonal (times YaRN's concentration factor, which the table's cos
// and sin carry), so backward, its transpose, is the rotation by -angle.
#ifndef CONVEYOR_RUNTIME_CPU_ROPE_H_
#define CONVEYOR_RUNTIME_CPU_ROPE_H_

#include <cstdint>

#include "runtime/op_params.h"

namespace conveyor::cpu {

// Rotates `count` head vectors of length 2 * table.half, spaced `stride` floats apart,
// all at sequence position `pos`; inverse = true rotates backwards (for gradients).
void ApplyRope(const RopeTable& table, int64_t pos, int64_t count, int64_t stride, bool inverse,
               float* heads);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_ROPE_H_
