// Named parameters with fp32 gradients, initialised layout-independently.
#ifndef CONVEYOR_MODEL_PARAMETER_H_
#define CONVEYOR_MODEL_PARAMETER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace conveyor {

struct Parameter {
  std::string name;  // e.g. "layers.3.mlp.fc1.weight": also the init stream's name
  Tensor value;
  Tensor grad;       // accumulated over the micro-batches of a step
  bool weight_decay;  // Megatron excludes biases and norm weights
};

enum class InitKind { kNormal, kZeros, kOnes };

struct InitSpec {
  InitKind kind;
  float std = 0.0f;  // for kNormal
};

// Owns the parameters of a model (or of the part a rank holds). Pointers returned by
// Add stay valid for the store's lifetime.
class ParameterStore {
 public:
  explicit ParameterStore(uint64_t seed) : seed_(seed) {}

  // Normal values are CounterRng(seed, StreamId(name)).Normal(global element index),
  // so the value of an element never depends on which rank holds it.
  Parameter* Add(const std::string& name, std::vector<int64_t> shape, InitSpec init,
                 bool weight_decay);

  std::vector<Parameter*> parameters();
  Parameter* Find(const std::string& name);
  void ZeroGrads();
  int64_t NumElements() const;

 private:
  uint64_t seed_;
  std::deque<Parameter> params_;  // deque: stable addresses
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_PARAMETER_H_
