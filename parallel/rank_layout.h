// Megatron's rank order: TP fastest, then DP, then PP,
//   rank = pp * (TP * DP) + dp * TP + tp,
// so TP ranks are adjacent (one node, fastest links) and pipeline stages are
// furthest apart. Pure arithmetic; ParallelState builds communicators from it.
#ifndef CONVEYOR_PARALLEL_RANK_LAYOUT_H_
#define CONVEYOR_PARALLEL_RANK_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace conveyor {

struct RankCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};

// OK when tp >= 1, pp >= 1 and tp * pp divides world; otherwise the error names
// --tensor-model-parallel-size / --pipeline-model-parallel-size and the world size.
absl::Status ValidateLayout(int tp, int pp, int world);

// Requires ValidateLayout(tp, pp, world).ok() and 0 <= rank < world.
RankCoords CoordsOf(int rank, int tp, int pp, int world);
int RankOf(const RankCoords& coords, int tp, int pp, int world);

enum class GroupKind {
  kWorld,
  kTensor,     // same dp and pp
  kData,       // same tp and pp
  kPipeline,   // same tp and dp
  kEmbedding,  // first and last stage of a pipeline group (tied embeddings)
  kModel,      // tensor x pipeline: same dp
};

// Short names used in group names: "world", "tp", "dp", "pp", "embd", "mp".
const char* GroupKindName(GroupKind kind);

// Every group of `kind` in the job, each in group-rank order, ordered by their
// smallest rank; the same lists as Megatron's initialize_model_parallel.
std::vector<std::vector<int>> AllGroups(GroupKind kind, int tp, int pp, int world);

// The group of `kind` that holds `rank`; empty when `rank` is in none (embedding
// groups hold only the first and last stages).
std::vector<int> GroupOf(GroupKind kind, int rank, int tp, int pp, int world);

// A table from rank to (tp, pp, dp) for --dry-run, one line per rank, e.g.
//   rank map: world 4 = TP 2 x PP 1 x DP 2 (rank = pp*4 + dp*2 + tp)
//   rank  tp  pp  dp
//      0   0   0   0
// An invalid layout gives one line with the error.
std::string RankMap(int tp, int pp, int world);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_RANK_LAYOUT_H_
