#include "model/linear.h"

#include "runtime/cpu/gemm.h"

namespace conveyor {

Linear::Linear(ParameterStore* store, const std::string& name, int64_t in, int64_t out, bool bias,
               float init_std, LinearParallelism parallelism, Sharding split)
    : parallelism_(parallelism),
      weight_(store->Add(name + ".weight", {out, in}, {InitKind::kNormal, init_std}, true, split)),
      bias_(nullptr) {
  out_ = weight_->value.dim(0);
  in_ = weight_->value.dim(1);
  if (bias) {
    const bool split_bias = parallelism == LinearParallelism::kColumn && !split.replicated();
    bias_ = store->Add(name + ".bias", {out}, {InitKind::kZeros}, false,
                       split_bias ? Sharding{0, split.ranges} : Sharding::Replicated());
  }
}

void Linear::AddBias(float* y, int64_t rows) const {
  if (bias_ == nullptr) return;
  const float* b = bias_->value.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out_; ++o) y[r * out_ + o] += b[o];
  }
}

void Linear::Forward(const float* x, int64_t rows, float* y) const {
  cpu::Gemm(false, true, rows, out_, in_, 1.0f, x, weight_->value.data(), 0.0f, y);
  if (parallelism_ == LinearParallelism::kColumn) AddBias(y, rows);
}

void Linear::BackwardInput(const float* dy, int64_t rows, float* dx) const {
  cpu::Gemm(false, false, rows, in_, out_, 1.0f, dy, weight_->value.data(), 0.0f, dx);
}

void Linear::BackwardWeight(const float* x, const float* dy, int64_t rows) {
  cpu::Gemm(true, false, out_, in_, rows, 1.0f, dy, x, 1.0f, weight_->grad.data());
  if (bias_ == nullptr) return;
  float* db = bias_->grad.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out_; ++o) db[o] += dy[r * out_ + o];
  }
}

}  // namespace conveyor
