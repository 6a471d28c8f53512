// Megatron's rank order (tp-cp-dp-pp): TP fastest, then CP, then DP, then PP,
//   rank = pp * (TP * CP * DP) + dp * (TP * CP) + cp * TP + tp,
// so TP ranks are adjacent (one node, fastest links), context-parallel ranks (which
// pass keys and values around a ring every layer) next, and pipeline stages are
// furthest apart. Pure arithmetic; ParallelState builds communicators from it. `cp`
// (--context-parallel-size) defaults to 1.
//
// Expert parallelism (`ep`, --expert-model-parallel-size, default 1, and `etp`,
// --expert-tensor-parallel-size, default TP) re-divides each stage's ranks for the
// experts, as Megatron's expert rank generator (order tp-ep-dp-pp over the stage) does:
// with the rank's place in its stage
//   y = (dp * CP + cp) * TP + tp,
// its expert-tensor index is y % ETP, its expert-parallel index (y / ETP) % EP and its
// expert-data-parallel index y / (ETP * EP). With ETP = TP an expert-parallel group is EP
// consecutive data x context ranks of one tp; with ETP < TP it also crosses the TP
// group (whose ranks then share each expert's rows: model/expert_row_share.h).
#ifndef CONVEYOR_PARALLEL_RANK_LAYOUT_H_
#define CONVEYOR_PARALLEL_RANK_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace conveyor {

// A job's parallel sizes, Megatron's process-group sizes: world = TP x CP x PP x DP, and
// each stage's TP x CP x DP ranks re-divided for the experts into ETP x EP x expert DP.
// A new parallel dimension is a field here.
struct ParallelSizes {
  int tp = 1;
  int cp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1;
  int etp = 1;  // --expert-tensor-parallel-size, its 0 (TP) resolved

  int world() const { return tp * cp * pp * dp; }
  int stage_ranks() const { return tp * cp * dp; }
  // How many of a stage's ranks hold each expert shard (ExpertDataParallelSize).
  int expert_dp() const;
  // ExpertsHaveOwnGroups for these sizes.
  bool experts_have_own_groups() const;
};

struct RankCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  int cp = 0;
};

// The sizes of a job of `world` ranks under the size flags, DP = world / (TP x CP x PP);
// etp = 0 means TP (Megatron's default), here and below. InvalidArgument, naming the size
// flags and the world size, unless tp, cp, pp, ep >= 1, TP x CP x PP divides world, etp
// divides tp and ETP x EP divides a stage's TP x DP x CP ranks.
absl::StatusOr<ParallelSizes> ResolveLayout(int tp, int pp, int world, int cp = 1, int ep = 1,
                                            int etp = 0);

// `layout` comes from ResolveLayout, and 0 <= rank < layout.world().
RankCoords CoordsOf(int rank, const ParallelSizes& layout);
int RankOf(const RankCoords& coords, const ParallelSizes& layout);

enum class GroupKind {
  kWorld,
  kTensor,        // same dp and pp
  kData,          // same tp and pp
  kPipeline,      // same tp and dp
  kEmbedding,     // first and last stage of a pipeline group (tied embeddings)
  kModel,         // tensor x pipeline: same dp and cp
  kContext,       // same tp, dp and pp: the ring of context parallelism
  kDataContext,   // same tp and pp: data x context, where gradients are reduced
  kExpert,        // same pp, expert-tensor and expert-data index: the all-to-all
  kExpertData,    // same pp, expert-tensor and expert index: expert gradients' reduction
  kExpertTensor,  // same pp, expert and expert-data index: an expert's shards
};

// Whether a mixture of experts' routed experts have groups of their own (expert-parallel
// and expert-data-parallel), apart from the dense parameters' data x context copies: with
// EP > 1, or an expert tensor parallelism other than TP (etp 0: TP).
bool ExpertsHaveOwnGroups(int tp, int ep, int etp = 0);
// The expert-data-parallel size: how many of a stage's `stage_ranks` (TP x CP x DP) ranks
// hold each expert shard. Requires ETP x EP to divide them.
int ExpertDataParallelSize(int stage_ranks, int ep, int etp);

// Short names used in group names: "world", "tp", "dp", "pp", "embd", "mp", "cp",
// "dp-cp", "ep", "expt-dp", "expt-tp".
const char* GroupKindName(GroupKind kind);

// Every group of `kind` in the job, each in group-rank order, ordered by their
// smallest rank; the same lists as Megatron's initialize_model_parallel. `layout` comes
// from ResolveLayout.
std::vector<std::vector<int>> AllGroups(GroupKind kind, const ParallelSizes& layout);

// The group of `kind` that holds `rank`; empty when `rank` is in none (embedding
// groups hold only the first and last stages).
std::vector<int> GroupOf(GroupKind kind, int rank, const ParallelSizes& layout);

// A table from rank to (tp, pp, dp) for --dry-run, one line per rank, e.g.
//   rank map: world 4 = TP 2 x PP 1 x DP 2 (rank = pp*4 + dp*2 + tp)
//   rank  tp  pp  dp
//      0   0   0   0
// An invalid layout (ResolveLayout's error) gives one line with the error.
// With CP > 1 the table has a cp column.
std::string RankMap(int tp, int pp, int world, int cp = 1);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_RANK_LAYOUT_H_
