// y = x W^T + b with W stored [out, in] as Megatron stores it. Backward is split:
// BackwardInput (dx = dy W) runs on the critical path, BackwardWeight
// (dW += dy^T x, db += column sums of dy) can be deferred by zero-bubble schedules.
#ifndef CONVEYOR_MODEL_LINEAR_H_
#define CONVEYOR_MODEL_LINEAR_H_

#include <cstdint>
#include <string>

#include "model/parameter.h"

namespace conveyor {

class Linear {
 public:
  Linear(ParameterStore* store, const std::string& name, int64_t in, int64_t out, bool bias,
         float init_std);

  void Forward(const float* x, int64_t rows, float* y) const;
  void BackwardInput(const float* dy, int64_t rows, float* dx) const;
  void BackwardWeight(const float* x, const float* dy, int64_t rows);

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  int64_t in_;
  int64_t out_;
  Parameter* weight_;
  Parameter* bias_;  // null without bias
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_LINEAR_H_
