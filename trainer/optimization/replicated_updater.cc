// The DDP updater: every data-parallel rank holds all parameters and optimizer state;
// gradients live in one buffer of buckets of at most --ddp-bucket-size elements
// (trainer/optimization/parameter_buckets.h), each summed over DP in place (trainer/optimization/gradient_reduction.h).
// Under expert parallelism the routed experts' parameters (Parameter::expert_parallel)
// have a buffer of their own, summed over the expert-data-parallel group instead (as
// Megatron's expert-parallel buffers).
//
// With --overlap-grad-reduce a bucket's all-reduce starts, on a communication thread,
// as soon as backward has finished all its parameters (GradientsReady), while the
// backward of the other layers goes on; ReduceGradients then waits for those and
// reduces what is left.
#include <algorithm>
#include <memory>

#include "base/status_macros.h"
#include "trainer/optimization/communication_thread.h"
#include "trainer/optimization/gradient_reduction.h"
#include "trainer/optimization/optimizer.h"
#include "trainer/optimization/parameter_buckets.h"
#include "trainer/optimization/parameter_updater.h"

namespace conveyor {
namespace {

// The gradients of parameters replicated over one group, and their sum over it.
struct ReducedBuffer {
  std::vector<Bucket> buckets;
  Tensor grads;  // every parameter's gradient is a view into it
  std::unique_ptr<GradientReduction> reduction;
};

// The dense parameters' buffer (over DP x CP), then the expert-parallel ones' (over the
// expert-data-parallel group), each only when it has parameters.
std::vector<ReducedBuffer> MakeBuffers(const std::vector<Parameter*>& params,
                                       const ParallelConfig& parallel, const RankContext& context,
                                       const OptimizerOps& ops) {
  std::vector<Parameter*> dense, experts;
  for (Parameter* p : params) (p->expert_parallel ? experts : dense).push_back(p);
  std::vector<ReducedBuffer> buffers;
  for (const std::vector<Parameter*>* members : {&dense, &experts}) {
    if (members->empty()) continue;
    ReducedBuffer b;
    b.buckets = MakeBuckets(*members, parallel.ddp_bucket_size(), /*align=*/1);
    b.grads = AdoptGradients(b.buckets, ops.device());
    b.reduction = std::make_unique<GradientReduction>(context.replicas(*members->front()), ops,
                                                      parallel.grad_reduce_in_bf16(),
                                                      LargestBucket(b.buckets));
    buffers.push_back(std::move(b));
  }
  return buffers;
}

class ReplicatedUpdater : public ParameterUpdater {
 public:
  ReplicatedUpdater(const ResolvedConfig& resolved, const RankContext& context,
                    UpdatedParameters params, const OptimizerOps* ops)
      : ops_(ops),
        clip_grad_(resolved.config().optimizer().clip_grad()),
        context_(context),
        params_(std::move(params)),
        buffers_(MakeBuffers(params_.all, resolved.config().parallel(), context, *ops)),
        // After MakeBuffers: the segments point at the gradients in the buffers.
        optimizer_(resolved.config().optimizer(), resolved.optimizer(),
                   WholeParameterSegments(params_.all), ops) {
    std::vector<Bucket> all;
    for (size_t g = 0; g < buffers_.size(); ++g) {
      for (size_t b = 0; b < buffers_[g].buckets.size(); ++b) {
        buckets_.push_back({g, b});
        all.push_back(buffers_[g].buckets[b]);
      }
    }
    readiness_ = std::make_unique<BucketReadiness>(all);
    for (const Parameter* p : params_.all) reduces_ = reduces_ || context_.replicas(*p).size() > 1;
    if (reduces_ && resolved.config().parallel().overlap_grad_reduce()) {
      overlap_ =
          std::make_unique<CommunicationThread>([this](size_t k) { return ReduceBucket(k); });
    }
  }

  void GradientsReady(const std::vector<Parameter*>& ready) override {
    if (overlap_ == nullptr) return;
    for (const size_t k : readiness_->Complete(ready)) overlap_->Launch(k);
  }

  absl::Status ReduceGradients() override {
    if (reduces_) {
      if (overlap_ != nullptr) RETURN_IF_ERROR(overlap_->WaitAll());
      for (size_t k = 0; k < buckets_.size(); ++k) {
        if (overlap_ == nullptr || !overlap_->Launched(k)) RETURN_IF_ERROR(ReduceBucket(k));
      }
      if (overlap_ != nullptr) overlap_->Forget();
      readiness_->Reset();
    }
    // Sums over TP (sequence parallel) and the embedding group commute with the DP
    // sum, so they may come after it.
    return ReduceSharedGradients(params_.all, context_, *ops_);
  }

  // Equal across DP (gradients after the reduction): only model parallelism splits them,
  // and expert parallelism the experts.
  absl::StatusOr<double> GradNorm() override {
    ASSIGN_OR_RETURN(const double squares, SumOfSquares(&Parameter::grad));
    return FinishNorm(squares, context_);
  }
  absl::StatusOr<double> ParamsNorm() override {
    ASSIGN_OR_RETURN(const double squares, SumOfSquares(&Parameter::value));
    return FinishNorm(squares, context_);
  }
  absl::StatusOr<int64_t> GradZeros() override {
    // Counts are exact in a double up to 2^53.
    ASSIGN_OR_RETURN(const double experts,
                     ExpertsShare(static_cast<double>(
                         ops_->CountZeros(Counted(&Parameter::grad, /*expert_parallel=*/true)))));
    return FinishCount(
        ops_->CountZeros(Counted(&Parameter::grad, false)) + static_cast<int64_t>(experts),
        context_);
  }

  absl::Status Step(double grad_norm, const StepLearningRates& lr) override {
    optimizer_.Step(lr, ClipCoefficient(grad_norm, clip_grad_));
    return absl::OkStatus();
  }

  Optimizer& optimizer() override { return optimizer_; }

 private:
  // A bucket of one of the buffers, in the order of all buffers' buckets.
  struct BucketRef {
    size_t buffer, index;
  };

  // Every parameter's `tensor` among the expert-parallel ones or the others, each
  // parameter counted once.
  std::vector<FloatArray> Counted(Tensor Parameter::*tensor, bool expert_parallel) {
    std::vector<FloatArray> counted;
    for (Parameter* p : params_.all) {
      if (p->expert_parallel == expert_parallel && CountsTowardNorm(*p, params_, context_)) {
        counted.push_back({(p->*tensor).data(), (p->*tensor).numel()});
      }
    }
    return counted;
  }

  // The squares of this rank's `tensor`s, the experts' as ExpertsShare counts them.
  absl::StatusOr<double> SumOfSquares(Tensor Parameter::*tensor) {
    ASSIGN_OR_RETURN(const double experts,
                     ExpertsShare(ops_->SumOfSquares(Counted(tensor, /*expert_parallel=*/true))));
    return ops_->SumOfSquares(Counted(tensor, false)) + experts;
  }

  // This rank's part, in the model-parallel sum (FinishNorm, FinishCount), of the experts'
  // `local` sum: summed over the expert-parallel group (each of its ranks holds other
  // experts), then counted by the first ETP ranks of each TP group only (with
  // --expert-tensor-parallel-size ETP < TP the other TP ranks hold copies of theirs).
  absl::StatusOr<double> ExpertsShare(double local) {
    RETURN_IF_ERROR(context_.ep().AllReduceSum(&local, 1));
    return context_.tp_rank() < context_.expert_tp().size() ? local : 0.0;
  }

  absl::Status ReduceBucket(size_t k) {
    ReducedBuffer& b = buffers_[buckets_[k].buffer];
    const Bucket& bucket = b.buckets[buckets_[k].index];
    return b.reduction->AllReduce(b.grads, bucket.start, bucket.size);
  }

  const OptimizerOps* ops_;
  double clip_grad_;
  const RankContext& context_;
  UpdatedParameters params_;
  std::vector<ReducedBuffer> buffers_;
  Optimizer optimizer_;
  std::vector<BucketRef> buckets_;  // all buffers' buckets
  std::unique_ptr<BucketReadiness> readiness_;
  bool reduces_ = false;  // some buffer is replicated over more than one rank
  std::unique_ptr<CommunicationThread> overlap_;  // --overlap-grad-reduce with DP > 1
};

}  // namespace

std::unique_ptr<ParameterUpdater> MakeReplicatedUpdater(const ResolvedConfig& config,
                                                        const RankContext& context,
                                                        UpdatedParameters params,
                                                        const OptimizerOps* ops) {
  return std::make_unique<ReplicatedUpdater>(config, context, std::move(params), ops);
}

}  // namespace conveyor
