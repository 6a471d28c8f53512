#include "model/parameter.h"

#include <algorithm>
#include <thread>

#include "runtime/philox.h"

namespace conveyor {
namespace {

// Drawing a normal costs ~50 ns (Philox, then Box-Muller in double): a 1.3B-parameter
// model would take over a minute on one core. Large tensors are drawn on every core;
// an element's value depends on its global index alone, so the split changes nothing.
constexpr int64_t kElementsPerThread = 1 << 20;

void DrawNormals(const CounterRng& rng, float std, const std::vector<int64_t>& global, float* v) {
  const int64_t n = static_cast<int64_t>(global.size());
  const int64_t threads = std::clamp<int64_t>(n / kElementsPerThread, 1,
                                              std::max(1u, std::thread::hardware_concurrency()));
  auto draw = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) v[i] = std * rng.Normal(global[i]);
  };
  std::vector<std::thread> workers;
  const int64_t per = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    workers.emplace_back(draw, t * per, std::min(n, (t + 1) * per));
  }
  draw(0, std::min(n, per));
  for (std::thread& w : workers) w.join();
}

}  // namespace

Sharding Sharding::Block(int dim, int64_t extent, int parts, int index) {
  const int64_t length = extent / parts;
  return {dim, {{index * length, length}}};
}

int64_t Parameter::local_numel() const {
  int64_t n = 1;
  for (int64_t d : local_shape) n *= d;
  return n;
}

std::vector<int64_t> GlobalIndices(const Parameter& p) {
  const std::vector<int64_t>& global = p.global_shape;
  std::vector<int64_t> out;
  out.reserve(p.local_numel());
  if (p.sharding.replicated()) {
    for (int64_t i = 0; i < p.local_numel(); ++i) out.push_back(i);
    return out;
  }
  // View the tensor as [outer, dim, inner] around the sharded dimension.
  const int d = p.sharding.dim;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= global[i];
  for (size_t i = d + 1; i < global.size(); ++i) inner *= global[i];
  for (int64_t o = 0; o < outer; ++o) {
    for (const ShardRange& r : p.sharding.ranges) {
      for (int64_t k = r.global_start; k < r.global_start + r.length; ++k) {
        for (int64_t i = 0; i < inner; ++i) out.push_back((o * global[d] + k) * inner + i);
      }
    }
  }
  return out;
}

Parameter* ParameterStore::Add(const std::string& name, std::vector<int64_t> global_shape,
                               InitSpec init, bool weight_decay, Sharding sharding) {
  std::vector<int64_t> local_shape = global_shape;
  if (!sharding.replicated()) {
    local_shape[sharding.dim] = 0;
    for (const ShardRange& r : sharding.ranges) local_shape[sharding.dim] += r.length;
  }
  Parameter p;
  p.name = name;
  p.global_shape = global_shape;
  p.sharding = sharding;
  p.local_shape = local_shape;
  p.value = Tensor::Zeros(local_shape, MemoryCategory::kWeights);
  p.grad = Tensor::Zeros(local_shape, MemoryCategory::kGrads);
  p.weight_decay = weight_decay;
  float* v = p.value.data();
  const int64_t n = p.value.numel();
  switch (init.kind) {
    case InitKind::kNormal: {
      DrawNormals(CounterRng(seed_, StreamId(name)), init.std, GlobalIndices(p), v);
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
  for (const Parameter& p : params_) n += p.local_numel();
  return n;
}

}  // namespace conveyor
