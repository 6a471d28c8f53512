#include "parallel/rank_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conveyor {

absl::Status ValidateLayout(int tp, int pp, int world, int cp, int ep) {
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
  const int dp_cp = world / (tp * pp);
  if (ep < 1 || dp_cp % ep != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--expert-model-parallel-size (%d) must be at least 1 and divide the data-parallel "
        "size x --context-parallel-size (%d): the experts are spread over data-parallel "
        "ranks; choose a divisor of %d",
        ep, dp_cp, dp_cp));
  }
  return absl::OkStatus();
}

RankCoords CoordsOf(int rank, int tp, int pp, int world, int cp) {
  const int dp = world / (tp * cp * pp);
  RankCoords c;
  c.tp = rank % tp;
  c.cp = (rank / tp) % cp;
  c.dp = (rank / (tp * cp)) % dp;
  c.pp = rank / (tp * cp * dp);
  return c;
}

int RankOf(const RankCoords& c, int tp, int pp, int world, int cp) {
  const int dp = world / (tp * cp * pp);
  return ((c.pp * dp + c.dp) * cp + c.cp) * tp + c.tp;
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
  }
  return "?";
}

std::vector<int> GroupOf(GroupKind kind, int rank, int tp, int pp, int world, int cp, int ep) {
  const int dp = world / (tp * cp * pp);
  const RankCoords me = CoordsOf(rank, tp, pp, world, cp);
  std::vector<int> ranks;
  auto add = [&](int t, int d, int p, int c) {
    ranks.push_back(RankOf({t, d, p, c}, tp, pp, world, cp));
  };
  // The rank's place x among its stage's data x context ranks (see the header), and the
  // rank whose place is `x` in this rank's stage and tensor slice.
  const int x = me.dp * cp + me.cp;
  auto add_place = [&](int place) { add(me.tp, place / cp, me.pp, place % cp); };
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
    case GroupKind::kExpert:  // places edp * EP + e, e = 0..EP-1
      for (int e = 0; e < ep; ++e) add_place(x / ep * ep + e);
      break;
    case GroupKind::kExpertData:  // places d * EP + e, d = 0..DP*CP/EP-1
      for (int place = x % ep; place < dp * cp; place += ep) add_place(place);
      break;
  }
  return ranks;
}

std::vector<std::vector<int>> AllGroups(GroupKind kind, int tp, int pp, int world, int cp,
                                        int ep) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < world; ++r) {
    std::vector<int> group = GroupOf(kind, r, tp, pp, world, cp, ep);
    if (group.empty() || std::find(groups.begin(), groups.end(), group) != groups.end()) {
      continue;
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string RankMap(int tp, int pp, int world, int cp) {
  if (absl::Status s = ValidateLayout(tp, pp, world, cp); !s.ok()) {
    return absl::StrCat("rank map: ", s.message(), "\n");
  }
  const int dp = world / (tp * cp * pp);
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
    const RankCoords c = CoordsOf(r, tp, pp, world, cp);
    if (cp == 1) {
      absl::StrAppendFormat(&text, "%4d %3d %3d %3d\n", r, c.tp, c.pp, c.dp);
    } else {
      absl::StrAppendFormat(&text, "%4d %3d %3d %3d %3d\n", r, c.tp, c.cp, c.pp, c.dp);
    }
  }
  return text;
}

}  // namespace conveyor
