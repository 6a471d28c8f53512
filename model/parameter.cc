#include "model/parameter.h"

#include "runtime/philox.h"

namespace conveyor {

Parameter* ParameterStore::Add(const std::string& name, std::vector<int64_t> shape,
                               InitSpec init, bool weight_decay) {
  Parameter p{name, Tensor::Zeros(shape, MemoryCategory::kWeights),
              Tensor::Zeros(shape, MemoryCategory::kGrads), weight_decay};
  float* v = p.value.data();
  const int64_t n = p.value.numel();
  switch (init.kind) {
    case InitKind::kNormal: {
      const CounterRng rng(seed_, StreamId(name));
      for (int64_t i = 0; i < n; ++i) v[i] = init.std * rng.Normal(static_cast<uint64_t>(i));
      break;
    }
    case InitKind::kOnes:
      for (int64_t i = 0; i < n; ++i) v[i] = 1.0f;
      break;
    case InitKind::kZeros:
      break;
  }
  params_.push_back(std::move(p));
  return &params_.back();
}

std::vector<Parameter*> ParameterStore::parameters() {
  std::vector<Parameter*> out;
  for (Parameter& p : params_) out.push_back(&p);
  return out;
}

Parameter* ParameterStore::Find(const std::string& name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void ParameterStore::ZeroGrads() {
  for (Parameter& p : params_) p.grad.SetZero();
}

int64_t ParameterStore::NumElements() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.value.numel();
  return n;
}

}  // namespace conveyor
