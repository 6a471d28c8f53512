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
      model_parallel_(&state.model_parallel()),
      tied_embedding_(no_embedding_peers_.get()),
      dp_rank_(state.coords().dp),
      dp_size_(state.dp_size()),
      pipeline_{pipeline::StageLayout::kLoop, state.pp_size(), 1, state.coords().pp} {}

RankContext::RankContext(RankContext&&) = default;
RankContext& RankContext::operator=(RankContext&&) = default;
RankContext::~RankContext() = default;

absl::StatusOr<RankContext> RankContext::Create(ParallelState& state, const Config& config) {
  const ParallelConfig& p = config.parallel();
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(p.pipeline_schedule()));
  RankContext context(state);
  context.sequence_parallel_ = p.sequence_parallel();
  context.pipeline_.layout = schedule.layout;
  context.pipeline_.num_chunks = p.num_virtual_stages_per_pipeline_rank();
  const bool tied_across_pipeline = !config.model().untie_embeddings_and_output_weights() &&
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

absl::StatusOr<double> MeanLossOverRanks(double local_sum, int64_t micro_batches,
                                         const RankContext& context) {
  RETURN_IF_ERROR(context.pp().AllReduceSum(&local_sum, 1));
  RETURN_IF_ERROR(context.dp().AllReduceSum(&local_sum, 1));
  return local_sum / static_cast<double>(micro_batches * context.dp_size());
}

}  // namespace conveyor
