#include "model/routed_experts.h"

#include "base/status_macros.h"
#include "parallel/rank_layout.h"

namespace conveyor {
namespace {

// The experts' shards cross the expert-tensor-parallel group as the dense layers' cross
// the tensor-parallel group.
ModelGroups ExpertShardGroups(const ModelGroups& groups) {
  ModelGroups experts = groups;
  experts.tp = groups.etp;
  return experts;
}

}  // namespace

RoutedExperts::RoutedExperts(const Ops* ops, ParameterStore* store, const std::string& name,
                             int64_t experts, int64_t hidden, int64_t ffn, bool swiglu,
                             float init_std, float output_std, const TensorParallel& tp)
    : ops_(ops),
      ep_(tp.groups().ep),
      expert_tp_(ExpertShardGroups(tp.groups()), /*sequence_parallel=*/false),
      row_parts_(tp.size() / expert_tp_.size()),
      row_part_(tp.rank() / expert_tp_.size()),
      hidden_(hidden),
      local_(exchanges() ? LocalExpertsOf(experts, ep_->size(), ep_->rank())
                         : LocalExperts{0, experts}) {
  experts_.reserve(local_.count);
  for (int64_t e = local_.first; e < local_.first + local_.count; ++e) {
    experts_.emplace_back(ops, store, name + "." + std::to_string(e), hidden, ffn, swiglu, init_std,
                          output_std, expert_tp_);
  }
  // Held apart from the dense parameters' data x context copies.
  if (!ExpertsHaveOwnGroups(tp.size(), ep_->size(), expert_tp_.size())) {
    return;
  }
  std::vector<Parameter*> params;
  AppendParameters(&params);
  for (Parameter* p : params) p->expert_parallel = true;
}

Tensor RoutedExperts::Rows(const Tensor& t, absl::Span<const int32_t> index) const {
  Tensor out = ops_->NewActivation({static_cast<int64_t>(index.size()), hidden_});
  ops_->PermuteTokens(t, index, {}, &out);
  return out;
}

Tensor RoutedExperts::LocalRows(const Tensor& t, int64_t e, const RoutedExpertsStash& stash) const {
  const int64_t begin = stash.expert_begin[e];
  return t.View(begin * hidden_, {stash.expert_begin[e + 1] - begin, hidden_});
}

absl::StatusOr<Tensor> RoutedExperts::ToExperts(const Tensor& in,
                                                const RoutedExpertsStash& stash) const {
  Tensor received = ops_->NewActivation({stash.counts.received(), hidden_});
  RETURN_IF_ERROR(AllToAllRows(*ep_, *ops_, in, stash.counts.SendRowsPerRank(),
                               stash.counts.ReceiveRowsPerRank(), &received));
  Tensor grouped = ops_->NewActivation({stash.counts.received(), hidden_});
  ops_->PermuteTokens(received, stash.order, {}, &grouped);
  return grouped;
}

absl::StatusOr<Tensor> RoutedExperts::FromExperts(const Tensor& local,
                                                  const RoutedExpertsStash& stash,
                                                  int64_t rows) const {
  Tensor ungrouped = ops_->NewActivation({stash.counts.received(), hidden_});
  ops_->PermuteTokens(local, InverseOrder(stash.order), {}, &ungrouped);
  Tensor out = ops_->NewActivation({rows, hidden_});
  RETURN_IF_ERROR(AllToAllRows(*ep_, *ops_, ungrouped, stash.counts.ReceiveRowsPerRank(),
                               stash.counts.SendRowsPerRank(), &out));
  return out;
}

absl::StatusOr<Tensor> RoutedExperts::Forward(const Tensor& rows,
                                              const std::vector<int64_t>& expert_begin,
                                              RoutedExpertsStash* stash) const {
  if (row_parts_ == 1) return ForwardShare(rows, expert_begin, stash);
  stash->share = ShareOfRows(expert_begin, row_parts_, row_part_);
  ASSIGN_OR_RETURN(const Tensor out,
                   ForwardShare(Rows(rows, stash->share.rows), stash->share.expert_begin, stash));
  return Rows(out, stash->share.place);  // zeros outside the share
}

absl::StatusOr<Tensor> RoutedExperts::BackwardInput(const Tensor& d_out,
                                                    RoutedExpertsStash* stash) const {
  if (row_parts_ == 1) return BackwardShare(d_out, stash);
  ASSIGN_OR_RETURN(const Tensor d_in, BackwardShare(Rows(d_out, stash->share.rows), stash));
  return Rows(d_in, stash->share.place);
}

absl::StatusOr<Tensor> RoutedExperts::ForwardShare(const Tensor& rows,
                                                   const std::vector<int64_t>& expert_begin,
                                                   RoutedExpertsStash* stash) const {
  if (exchanges()) {
    std::vector<int64_t> rows_per_expert;
    for (size_t e = 0; e + 1 < expert_begin.size(); ++e) {
      rows_per_expert.push_back(expert_begin[e + 1] - expert_begin[e]);
    }
    ASSIGN_OR_RETURN(stash->counts, ExchangeExpertCounts(*ep_, rows_per_expert));
    stash->order = ExpertMajorOrder(stash->counts, &stash->expert_begin);
    ASSIGN_OR_RETURN(stash->input, ToExperts(rows, *stash));
  } else {
    stash->expert_begin = expert_begin;
    stash->input = rows;
  }
  Tensor out = ops_->NewActivation({stash->input.dim(0), hidden_});
  stash->experts.resize(experts_.size());
  for (size_t e = 0; e < experts_.size(); ++e) {
    Tensor expert_out = LocalRows(out, e, *stash);
    experts_[e].Forward(LocalRows(stash->input, e, *stash), &stash->experts[e], &expert_out);
  }
  if (!exchanges()) return out;
  return FromExperts(out, *stash, rows.dim(0));
}

absl::StatusOr<Tensor> RoutedExperts::BackwardShare(const Tensor& d_out,
                                                    RoutedExpertsStash* stash) const {
  Tensor d_local = d_out;
  if (exchanges()) {
    ASSIGN_OR_RETURN(d_local, ToExperts(d_out, *stash));
  }
  Tensor d_in = ops_->NewActivation({d_local.dim(0), hidden_});
  for (size_t e = 0; e < experts_.size(); ++e) {
    Tensor d_rows = LocalRows(d_in, e, *stash);
    experts_[e].BackwardInput(LocalRows(d_local, e, *stash), &stash->experts[e], &d_rows);
  }
  if (!exchanges()) return d_in;
  return FromExperts(d_in, *stash, d_out.dim(0));
}

void RoutedExperts::BackwardWeight(RoutedExpertsStash* stash) {
  for (size_t e = 0; e < experts_.size(); ++e) {
    experts_[e].BackwardWeight(LocalRows(stash->input, e, *stash), &stash->experts[e]);
  }
  *stash = RoutedExpertsStash();
}

void RoutedExperts::AppendParameters(std::vector<Parameter*>* out) const {
  for (const ExpertMlp& expert : experts_) expert.AppendParameters(out);
}

}  // namespace conveyor
