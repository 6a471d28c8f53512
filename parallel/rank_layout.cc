#include "parallel/rank_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conveyor {

int ParallelSizes::expert_dp() const { return ExpertDataParallelSize(stage_ranks(), ep, etp); }

bool ParallelSizes::experts_have_own_groups() const { return ExpertsHaveOwnGroups(tp, ep, etp); }

absl::StatusOr<ParallelSizes> ResolveLayout(int tp, int pp, int world, int cp, int ep, int etp) {
  if (tp < 1 || pp < 1 || cp < 1 || world < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tensor-model-parallel-size (%d), --pipeline-model-parallel-size (%d), "
        "--context-parallel-size (%d) and the world size (%d) must all be at least 1",
        tp, pp, cp, world));
  }
  if (world % (tp * cp * pp) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "world size %d is not divisible by --tensor-model-parallel-size (%d) x "
        "--context-parallel-size (%d) x --pipeline-model-parallel-size (%d) = %d; choose "
        "sizes whose product divides the number of ranks",
        world, tp, cp, pp, tp * cp * pp));
  }
  if (etp == 0) etp = tp;
  if (etp < 1 || tp % etp != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--expert-tensor-parallel-size (%d) must divide --tensor-model-parallel-size (%d): "
        "an expert's shards stay within one tensor-parallel group; choose a divisor of %d",
        etp, tp, tp));
  }
  // The ranks of a stage that hold each expert once, split over EP.
  const int expert_ranks = world / pp / etp;
  if (ep < 1 || expert_ranks % ep != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--expert-model-parallel-size (%d) must be at least 1 and divide the data-parallel "
        "size x --context-parallel-size x --tensor-model-parallel-size / "
        "--expert-tensor-parallel-size (%d): the experts are spread over a stage's ranks; "
        "choose a divisor of %d",
        ep, expert_ranks, expert_ranks));
  }
  ParallelSizes layout;
  layout.tp = tp;
  layout.cp = cp;
  layout.pp = pp;
  layout.dp = world / (tp * cp * pp);
  layout.ep = ep;
  layout.etp = etp;
  return layout;
}

RankCoords CoordsOf(int rank, const ParallelSizes& l) {
  RankCoords c;
  c.tp = rank % l.tp;
  c.cp = (rank / l.tp) % l.cp;
  c.dp = (rank / (l.tp * l.cp)) % l.dp;
  c.pp = rank / (l.tp * l.cp * l.dp);
  return c;
}

int RankOf(const RankCoords& c, const ParallelSizes& l) {
  return ((c.pp * l.dp + c.dp) * l.cp + c.cp) * l.tp + c.tp;
}

const char* GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kWorld:
      return "world";
    case GroupKind::kTensor:
      return "tp";
    case GroupKind::kData:
      return "dp";
    case GroupKind::kPipeline:
      return "pp";
    case GroupKind::kEmbedding:
      return "embd";
    case GroupKind::kModel:
      return "mp";
    case GroupKind::kContext:
      return "cp";
    case GroupKind::kDataContext:
      return "dp-cp";
    case GroupKind::kExpert:
      return "ep";
    case GroupKind::kExpertData:
      return "expt-dp";
    case GroupKind::kExpertTensor:
      return "expt-tp";
  }
  return "?";
}

bool ExpertsHaveOwnGroups(int tp, int ep, int etp) { return ep > 1 || (etp != 0 && etp != tp); }

int ExpertDataParallelSize(int stage_ranks, int ep, int etp) { return stage_ranks / (etp * ep); }

std::vector<int> GroupOf(GroupKind kind, int rank, const ParallelSizes& layout) {
  const int tp = layout.tp, cp = layout.cp, pp = layout.pp, dp = layout.dp;
  const int ep = layout.ep, etp = layout.etp, world = layout.world();
  const RankCoords me = CoordsOf(rank, layout);
  std::vector<int> ranks;
  auto add = [&](int t, int d, int p, int c) { ranks.push_back(RankOf({t, d, p, c}, layout)); };
  // The rank's place y in its stage, its expert coordinates (see the header), and the
  // rank of this stage whose expert coordinates are (t, e, d).
  const int y = (me.dp * cp + me.cp) * tp + me.tp;
  const int my_etp = y % etp, my_ep = y / etp % ep, my_edp = y / (etp * ep);
  auto add_expert_place = [&](int t, int e, int d) {
    const int place = (d * ep + e) * etp + t;
    const int x = place / tp;
    add(place % tp, x / cp, me.pp, x % cp);
  };
  switch (kind) {
    case GroupKind::kWorld:
      for (int r = 0; r < world; ++r) ranks.push_back(r);
      break;
    case GroupKind::kTensor:
      for (int t = 0; t < tp; ++t) add(t, me.dp, me.pp, me.cp);
      break;
    case GroupKind::kData:
      for (int d = 0; d < dp; ++d) add(me.tp, d, me.pp, me.cp);
      break;
    case GroupKind::kPipeline:
      for (int p = 0; p < pp; ++p) add(me.tp, me.dp, p, me.cp);
      break;
    case GroupKind::kEmbedding:
      // Megatron: [first, last] of the pipeline group; the rank alone when PP = 1.
      if (me.pp == 0 || me.pp == pp - 1) {
        add(me.tp, me.dp, 0, me.cp);
        if (pp > 1) add(me.tp, me.dp, pp - 1, me.cp);
      }
      break;
    case GroupKind::kModel:
      for (int p = 0; p < pp; ++p) {
        for (int t = 0; t < tp; ++t) add(t, me.dp, p, me.cp);
      }
      break;
    case GroupKind::kContext:
      for (int c = 0; c < cp; ++c) add(me.tp, me.dp, me.pp, c);
      break;
    case GroupKind::kDataContext:  // rank order: cp fastest
      for (int d = 0; d < dp; ++d) {
        for (int c = 0; c < cp; ++c) add(me.tp, d, me.pp, c);
      }
      break;
    case GroupKind::kExpert:
      for (int e = 0; e < ep; ++e) add_expert_place(my_etp, e, my_edp);
      break;
    case GroupKind::kExpertData:
      for (int d = 0; d < layout.expert_dp(); ++d) {
        add_expert_place(my_etp, my_ep, d);
      }
      break;
    case GroupKind::kExpertTensor:
      for (int t = 0; t < etp; ++t) add_expert_place(t, my_ep, my_edp);
      break;
  }
  return ranks;
}

std::vector<std::vector<int>> AllGroups(GroupKind kind, const ParallelSizes& layout) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < layout.world(); ++r) {
    std::vector<int> group = GroupOf(kind, r, layout);
    if (group.empty() || std::find(groups.begin(), groups.end(), group) != groups.end()) {
      continue;
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string RankMap(int tp, int pp, int world, int cp) {
  const absl::StatusOr<ParallelSizes> layout = ResolveLayout(tp, pp, world, cp);
  if (!layout.ok()) return absl::StrCat("rank map: ", layout.status().message(), "\n");
  const int dp = layout->dp;
  std::string text;
  if (cp == 1) {
    text = absl::StrFormat(
        "rank map: world %d = TP %d x PP %d x DP %d (rank = pp*%d + dp*%d + tp)\n"
        "rank  tp  pp  dp\n",
        world, tp, pp, dp, tp * dp, tp);
  } else {
    text = absl::StrFormat(
        "rank map: world %d = TP %d x CP %d x PP %d x DP %d (rank = pp*%d + dp*%d + cp*%d + "
        "tp)\nrank  tp  cp  pp  dp\n",
        world, tp, cp, pp, dp, tp * cp * dp, tp * cp, tp);
  }
  for (int r = 0; r < world; ++r) {
    const RankCoords c = CoordsOf(r, *layout);
    if (cp == 1) {
      absl::StrAppendFormat(&text, "%4d %3d %3d %3d\n", r, c.tp, c.pp, c.dp);
    } else {
      absl::StrAppendFormat(&text, "%4d %3d %3d %3d %3d\n", r, c.tp, c.cp, c.pp, c.dp);
    }
  }
  return text;
}

}  // namespace conveyor
