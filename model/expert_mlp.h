// One expert of a mixture-of-experts layer (and the shared expert): an MLP,
//   y = fc2(act(fc1(x)))
// with the model's activation (SwiGLU over fc1's [gate | up] halves, or GELU) and no
// biases (Megatron's MoE token dispatchers support none), tensor-parallel like the dense
// MLP over the group it is given (the expert-tensor-parallel group for routed experts,
// TP for the shared expert): fc1 column-parallel, fc2 row-parallel, so y is this rank's
// partial sum. Backward is split into B and W like the dense layer's.
#ifndef CONVEYOR_MODEL_EXPERT_MLP_H_
#define CONVEYOR_MODEL_EXPERT_MLP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/linear.h"
#include "model/parameter.h"
#include "model/tensor_parallel.h"
#include "runtime/ops.h"

namespace conveyor {

// What an expert keeps for one micro-batch between forward and W.
struct ExpertStash {
  Tensor fc1_out, act;  // forward (BackwardInput drops fc1_out)
  Tensor d_fc1, dy;     // BackwardInput, for W
};

class ExpertMlp {
 public:
  // Parameters `name`.fc1.weight [fc1 width, hidden] and `name`.fc2.weight [hidden, ffn]
  // (this rank's shards of `tp`); fc2 starts with `output_std` (Megatron's scaled init
  // of output projections).
  ExpertMlp(const Ops* ops, ParameterStore* store, const std::string& name, int64_t hidden,
            int64_t ffn, bool swiglu, float init_std, float output_std,
            const TensorParallel& tp);

  // x [rows, hidden] -> y [rows, hidden] (written, this rank's partial sum); rows may be 0.
  void Forward(const Tensor& x, ExpertStash* stash, Tensor* y) const;
  // dy [rows, hidden] -> dx [rows, hidden] (written, a partial sum); keeps dy for W.
  void BackwardInput(const Tensor& dy, ExpertStash* stash, Tensor* dx) const;
  // Accumulates the weight gradients from forward's input `x`; empties the stash.
  void BackwardWeight(const Tensor& x, ExpertStash* stash);

  void AppendParameters(std::vector<Parameter*>* out) const {
    fc1_.AppendParameters(out);
    fc2_.AppendParameters(out);
  }

 private:
  const Ops* ops_;
  int64_t local_ffn_;
  bool swiglu_;
  Linear fc1_;
  Linear fc2_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_EXPERT_MLP_H_
