#include "model/linear.h"

#include "runtime/cpu/gemm.h"

namespace conveyor {

Linear::Linear(ParameterStore* store, const std::string& name, int64_t in, int64_t out,
               bool bias, float init_std)
    : in_(in),
      out_(out),
      weight_(store->Add(name + ".weight", {out, in}, {InitKind::kNormal, init_std}, true)),
      bias_(bias ? store->Add(name + ".bias", {out}, {InitKind::kZeros}, false) : nullptr) {}

void Linear::Forward(const float* x, int64_t rows, float* y) const {
  cpu::Gemm(false, true, rows, out_, in_, 1.0f, x, weight_->value.data(), 0.0f, y);
  if (bias_ == nullptr) return;
  const float* b = bias_->value.data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out_; ++o) y[r * out_ + o] += b[o];
  }
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
