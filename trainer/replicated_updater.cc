// The DDP updater: every data-parallel rank holds all parameters and optimizer state;
// gradients live in one buffer of buckets of at most --ddp-bucket-size elements
// (trainer/parameter_buckets.h), each summed over DP in place (trainer/gradient_reduction.h).
//
// With --overlap-grad-reduce a bucket's all-reduce starts, on a communication thread,
// as soon as backward has finished all its parameters (GradientsReady), while the
// backward of the other layers goes on; ReduceGradients then waits for those and
// reduces what is left.
#include <algorithm>
#include <memory>

#include "base/status_macros.h"
#include "trainer/communication_thread.h"
#include "trainer/gradient_reduction.h"
#include "trainer/optimizer.h"
#include "trainer/parameter_buckets.h"
#include "trainer/parameter_updater.h"

namespace conveyor {
namespace {

int64_t LargestBucket(const std::vector<Bucket>& buckets) {
  int64_t largest = 0;
  for (const Bucket& b : buckets) largest = std::max(largest, b.size);
  return largest;
}

class ReplicatedUpdater : public ParameterUpdater {
 public:
  ReplicatedUpdater(const Config& config, const RankContext& context, UpdatedParameters params,
                    const OptimizerOps* ops)
      : ops_(ops),
        clip_grad_(config.optimizer().clip_grad()),
        context_(context),
        params_(std::move(params)),
        buckets_(MakeBuckets(params_.all, config.parallel().ddp_bucket_size(), /*align=*/1)),
        grads_(AdoptGradients(buckets_, ops->device())),
        optimizer_(config.optimizer(), WholeParameterSegments(params_.all), ops),
        reduction_(context.dp_cp(), *ops, config.parallel().grad_reduce_in_bf16(),
                   LargestBucket(buckets_)),
        readiness_(buckets_) {
    if (context_.dp_cp().size() > 1 && config.parallel().overlap_grad_reduce()) {
      overlap_ = std::make_unique<CommunicationThread>([this](size_t b) { return ReduceBucket(b); });
    }
  }

  void GradientsReady(const std::vector<Parameter*>& ready) override {
    if (overlap_ == nullptr) return;
    for (const size_t b : readiness_.Complete(ready)) overlap_->Launch(b);
  }

  absl::Status ReduceGradients() override {
    if (context_.dp_cp().size() > 1) {
      if (overlap_ != nullptr) RETURN_IF_ERROR(overlap_->WaitAll());
      for (size_t b = 0; b < buckets_.size(); ++b) {
        if (overlap_ == nullptr || !overlap_->Launched(b)) RETURN_IF_ERROR(ReduceBucket(b));
      }
      if (overlap_ != nullptr) overlap_->Forget();
      readiness_.Reset();
    }
    // Sums over TP (sequence parallel) and the embedding group commute with the DP
    // sum, so they may come after it.
    return ReduceSharedGradients(params_.all, context_, *ops_);
  }

  // Equal across DP (gradients after the reduction): only model parallelism splits them.
  absl::StatusOr<double> GradNorm() override {
    return FinishNorm(ops_->SumOfSquares(Counted(&Parameter::grad)), context_);
  }
  absl::StatusOr<double> ParamsNorm() override {
    return FinishNorm(ops_->SumOfSquares(Counted(&Parameter::value)), context_);
  }
  absl::StatusOr<int64_t> GradZeros() override {
    return FinishCount(ops_->CountZeros(Counted(&Parameter::grad)), context_);
  }

  absl::Status Step(double grad_norm, double lr) override {
    ClipGradients(*ops_, optimizer_.segments(), grad_norm, clip_grad_);
    optimizer_.Step(lr);
    return absl::OkStatus();
  }

  Optimizer& optimizer() override { return optimizer_; }

 private:
  // Every parameter's `tensor`, each parameter counted once.
  std::vector<FloatArray> Counted(Tensor Parameter::*tensor) {
    std::vector<FloatArray> counted;
    for (Parameter* p : params_.all) {
      if (CountsTowardNorm(*p, params_, context_)) {
        counted.push_back({(p->*tensor).data(), (p->*tensor).numel()});
      }
    }
    return counted;
  }

  absl::Status ReduceBucket(size_t b) {
    return reduction_.AllReduce(grads_, buckets_[b].start, buckets_[b].size);
  }

  const OptimizerOps* ops_;
  double clip_grad_;
  const RankContext& context_;
  UpdatedParameters params_;
  const std::vector<Bucket> buckets_;
  Tensor grads_;  // every parameter's gradient is a view into it (before optimizer_ points in)
  Optimizer optimizer_;
  GradientReduction reduction_;
  BucketReadiness readiness_;
  std::unique_ptr<CommunicationThread> overlap_;  // --overlap-grad-reduce with DP > 1
};

}  // namespace

std::unique_ptr<ParameterUpdater> MakeReplicatedUpdater(const Config& config,
                                                        const RankContext& context,
                                                        UpdatedParameters params,
                                                        const OptimizerOps* ops) {
  return std::make_unique<ReplicatedUpdater>(config, context, std::move(params), ops);
}

}  // namespace conveyor
