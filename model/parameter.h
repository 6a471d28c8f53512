// Named parameters with fp32 gradients, initialised layout-independently.
//
// A parameter has a global shape (the single-rank model's tensor) and a Sharding that
// says which part of it this rank holds, so initialisation, checkpoints and gradient
// norms can reason about the global tensor whatever the layout.
#ifndef CONVEYOR_MODEL_PARAMETER_H_
#define CONVEYOR_MODEL_PARAMETER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace conveyor {

struct ShardRange {
  int64_t global_start;
  int64_t length;
};

// The local tensor is the concatenation, along `dim`, of the global tensor's slices
// `ranges` (dim = -1: the whole tensor, replicated). Several ranges describe layouts
// such as SwiGLU's fc1, whose rank holds a slice of the gate half and of the up half.
struct Sharding {
  int dim = -1;
  std::vector<ShardRange> ranges;

  static Sharding Replicated() { return {}; }
  // Part `index` of `parts` equal contiguous blocks of a dimension of size `extent`.
  static Sharding Block(int dim, int64_t extent, int parts, int index);
  bool replicated() const { return dim < 0; }
};

struct Parameter {
  std::string name;  // e.g. "layers.3.mlp.fc1.weight": also the init stream's name
  std::vector<int64_t> global_shape;
  Sharding sharding;
  std::vector<int64_t> local_shape;  // of the part this rank holds
  // The local part in fp32 (the master weights on a bf16 backend). Empty when the
  // distributed optimizer holds the fp32 values in its master shard instead (see
  // read_in_compute_type).
  Tensor value;
  // fp32, accumulated over the micro-batches of a step: a view into the updater's
  // gradient buffer once the updater exists (Megatron's main_grad).
  Tensor grad;
  bool weight_decay = false;  // Megatron excludes biases and norm weights
  // Every op reads this parameter in the compute type, through compute_value() (GEMM
  // weights and the embedding table; see model/parameter_placement.h): on a backend whose
  // compute type is not fp32 it reads `compute`, value rounded to that type. The
  // distributed optimizer may then keep its fp32 values only in its master shard: 2 bytes
  // of weights per parameter, as in Megatron. Norm weights and biases are read in fp32.
  bool read_in_compute_type = false;
  Tensor compute;  // empty: ops read value

  const Tensor& compute_value() const { return compute.empty() ? value : compute; }
  int64_t local_numel() const;
  // Replicated across tensor-parallel ranks, but each rank sees only its sequence
  // shard under --sequence-parallel, so its gradient must be summed over TP.
  bool sequence_parallel = false;
  // Replicated across tensor-parallel ranks, but each rank's gradient covers only the
  // attention heads it holds (--qk-layernorm's norms), so it is summed over TP always.
  bool partial_over_heads = false;
  // Held by one expert-parallel rank (a routed expert under --expert-model-parallel-size
  // > 1): replicated only over the expert-data-parallel group, where its gradient is
  // summed, the distributed optimizer shards it and checkpoints write it once.
  bool expert_parallel = false;
  // The input word embedding or the output layer's weight (and a tied embedding's copy
  // on the last stage): Megatron's is_embedding_or_output_parameter, which
  // --decoupled-lr gives a learning rate of its own. Position embeddings are not.
  bool embedding_or_output = false;
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
  Parameter* Add(const std::string& name, std::vector<int64_t> global_shape, InitSpec init,
                 bool weight_decay, Sharding sharding = Sharding::Replicated());

  std::vector<Parameter*> parameters();
  Parameter* Find(const std::string& name);
  void ZeroGrads();
  int64_t NumElements() const;

 private:
  uint64_t seed_;
  std::deque<Parameter> params_;  // deque: stable addresses
};

// Global flat index of each local element, in local order.
std::vector<int64_t> GlobalIndices(const Parameter& p);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_PARAMETER_H_
