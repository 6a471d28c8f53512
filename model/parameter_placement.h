// Puts a model's parameters where its backend computes, in the precision it computes in.
//
// Parameters are created and initialised on the host (the counter-based initialisation
// is the same code for every backend, so every device starts from the same model). On
// a GPU backend they then move to the device: value (the fp32 master weights) and grad
// (fp32, Megatron's main_grad). When the backend computes in bf16, every parameter read
// in the compute type (GEMM weights, the embedding table) also gets a bf16 copy,
// refreshed from the master weights after each optimizer step and after a checkpoint
// load (by the distributed optimizer, for those whose master it holds).
#ifndef CONVEYOR_MODEL_PARAMETER_PLACEMENT_H_
#define CONVEYOR_MODEL_PARAMETER_PLACEMENT_H_

#include <vector>

#include "model/parameter.h"
#include "runtime/ops.h"

namespace conveyor {

// Moves value and grad to ops.device() and creates the compute copies (refreshed).
void PlaceParameters(const Ops& ops, const std::vector<Parameter*>& params);

// Rounds each master weight into its compute copy (no-op without copies).
void RefreshComputeCopies(const Ops& ops, const std::vector<Parameter*>& params);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_PARAMETER_PLACEMENT_H_
