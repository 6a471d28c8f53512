// A LayerNorm or RMSNorm layer with its parameters (gamma, and beta for LayerNorm).
// The per-row statistics of a forward pass are returned in NormStats so that the
// backward of that micro-batch can use them later.
#ifndef CONVEYOR_MODEL_NORM_LAYER_H_
#define CONVEYOR_MODEL_NORM_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/parameter.h"
#include "runtime/ops.h"

namespace conveyor {

struct NormStats {
  Tensor mean;
  Tensor rstd;
};

class NormLayer {
 public:
  // sequence_parallel: the layer sees only this rank's tokens (see Parameter).
  // `ops` computes the layer; it must outlive the layer.
  NormLayer(const Ops* ops, ParameterStore* store, const std::string& name, int64_t width, bool rms,
            float eps, bool sequence_parallel = false);

  NormStats Forward(const Tensor& x, Tensor* y) const;
  void BackwardInput(const Tensor& dy, const Tensor& x, const NormStats& stats, Tensor* dx) const;
  void BackwardWeight(const Tensor& dy, const Tensor& x, const NormStats& stats);

  void AppendParameters(std::vector<Parameter*>* out) const {
    out->push_back(gamma_);
    if (beta_ != nullptr) out->push_back(beta_);
  }

 private:
  const Ops* ops_;
  NormKind kind_;
  int64_t width_;
  float eps_;
  Parameter* gamma_;
  Parameter* beta_;  // null for RMSNorm
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_NORM_LAYER_H_
