#include "trainer/checkpoint/sharding_runs.h"

namespace conveyor {

std::vector<IndexRun> RunsForSharding(const std::vector<int64_t>& global_shape,
                                      const Sharding& sharding) {
  std::vector<IndexRun> runs;
  if (sharding.replicated()) {
    AppendBlock(&runs, 0, NumElements(global_shape));
    return runs;
  }
  // View the tensor as [outer, dim, inner] around the sharded dimension, as
  // GlobalIndices does: each (outer index, range) is one block of range * inner.
  const int d = sharding.dim;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= global_shape[i];
  for (size_t i = d + 1; i < global_shape.size(); ++i) inner *= global_shape[i];
  if (sharding.ranges.size() == 1) {
    // One range: a single strided run, whatever `outer` is.
    const ShardRange& r = sharding.ranges[0];
    if (outer == 0 || r.length == 0 || inner == 0) return runs;
    if (outer == 1 || r.length == global_shape[d]) {
      AppendBlock(&runs, r.global_start * inner,
                  outer == 1 ? r.length * inner : outer * r.length * inner);
      return runs;
    }
    runs.push_back({r.global_start * inner, r.length * inner, outer, global_shape[d] * inner});
    return runs;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (const ShardRange& r : sharding.ranges) {
      AppendBlock(&runs, (o * global_shape[d] + r.global_start) * inner, r.length * inner);
    }
  }
  return runs;
}

TensorShardRef ShardRefFor(const Parameter& p, const std::string& name, float* data) {
  return {name, p.global_shape, RunsForSharding(p.global_shape, p.sharding), data, p.local_numel()};
}

}  // namespace conveyor
