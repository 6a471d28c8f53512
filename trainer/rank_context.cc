#include "trainer/rank_context.h"

#include "base/status_macros.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/self_communicator.h"

namespace conveyor {

RankContext::RankContext(ParallelState& state)
    : no_embedding_peers_(std::make_unique<SelfCommunicator>("tied-embedding")),
      world_(&state.world()),
      tp_(&state.tp()),
      dp_(&state.dp()),
      pp_(&state.pp()),
      cp_(&state.cp()),
      dp_cp_(&state.dp_cp()),
      ep_(&state.ep()),
      expert_dp_(&state.expert_dp()),
      expert_tp_(&state.expert_tp()),
      model_parallel_(&state.model_parallel()),
      tied_embedding_(no_embedding_peers_.get()),
      dp_rank_(state.coords().dp),
      dp_size_(state.dp_size()),
      pipeline_{pipeline::StageLayout::kLoop, state.pp_size(), 1, state.coords().pp} {}

RankContext::RankContext(RankContext&&) = default;
RankContext& RankContext::operator=(RankContext&&) = default;
RankContext::~RankContext() = default;

absl::StatusOr<RankContext> RankContext::Create(ParallelState& state,
                                                const ResolvedConfig& config) {
  const ParallelConfig& p = config.config().parallel();
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(p.pipeline_schedule()));
  RankContext context(state);
  context.sequence_parallel_ = p.sequence_parallel();
  context.pipeline_.layout = schedule.layout;
  context.pipeline_.num_chunks = p.num_virtual_stages_per_pipeline_rank();
  // The last stage holds a copy of the word embedding when tied or for the multi-token
  // prediction depths.
  const ModelShape& shape = config.model_shape();
  const bool tied_across_pipeline = (shape.tied_embeddings || shape.mtp_layers > 0) &&
                                    state.pp_size() > 1 &&
                                    schedule.layout == pipeline::StageLayout::kLoop;
  if (tied_across_pipeline && state.embedding() != nullptr) {
    context.tied_embedding_ = state.embedding();
  }
  return context;
}

RankContext RankContext::SingleProcess() {
  std::unique_ptr<ParallelState> state = ParallelState::SingleProcess();
  RankContext context(*state);
  context.owned_state_ = std::move(state);
  return context;
}

absl::StatusOr<std::vector<double>> MtpLossesOverRanks(std::vector<double> local, int64_t depths,
                                                       int64_t micro_batches,
                                                       const RankContext& context) {
  if (depths == 0) return local;
  local.resize(depths, 0.0);  // a rank without the last stage holds none
  const int n = static_cast<int>(depths);
  RETURN_IF_ERROR(context.pp().AllReduceSum(local.data(), n));
  RETURN_IF_ERROR(context.cp().AllReduceSum(local.data(), n));  // each CP rank's share
  RETURN_IF_ERROR(context.dp().AllReduceSum(local.data(), n));
  for (double& loss : local) loss /= static_cast<double>(micro_batches * context.dp_size());
  return local;
}

absl::StatusOr<double> MeanLossOverRanks(const MaskedLoss& local, const RankContext& context) {
  // Token counts are exact in a double up to 2^53.
  double sums[2] = {local.sum, static_cast<double>(local.tokens)};
  RETURN_IF_ERROR(context.pp().AllReduceSum(sums, 2));
  RETURN_IF_ERROR(context.cp().AllReduceSum(sums, 2));  // each CP rank has its tokens' share
  RETURN_IF_ERROR(context.dp().AllReduceSum(sums, 2));
  return MaskedLoss{sums[0], static_cast<int64_t>(sums[1])}.Mean();
}

}  // namespace conveyor
