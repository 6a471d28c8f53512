// The distributed optimizer (ZeRO stage 1, Megatron's --use-distributed-optimizer).
//
// All local gradients are laid end to end in one flat buffer, padded to a multiple of
// DP. Data-parallel rank r owns elements [r * S, (r + 1) * S), S = padded / DP:
//   reduce-scatter  the flat gradients -> the summed gradients of the shard
//   norm            squares over the shard, summed over DP and model parallelism
//   step            clip and update the shard's fp32 master copy with the shard's
//                   optimizer state (1/DP of the replicated optimizer's)
//   all-gather      the updated shards -> every rank's parameters
// A parameter that straddles shards is updated piecewise by the ranks that own its
// pieces; its weight decay travels with each piece.
#include <algorithm>

#include "base/status_macros.h"
#include "trainer/optimizer.h"
#include "trainer/parameter_updater.h"

namespace conveyor {
namespace {

class DistributedOptimizer : public ParameterUpdater {
 public:
  DistributedOptimizer(const Config& config, const RankContext& context, UpdatedParameters params,
                       const OptimizerOps* ops)
      : ops_(ops),
        clip_grad_(config.optimizer().clip_grad()),
        context_(context),
        params_(std::move(params)) {
    const int dp = context_.dp().size();
    const int dp_rank = context_.dp().rank();
    int64_t total = 0;
    for (const Parameter* p : params_.all) total += p->value.numel();
    shard_size_ = (total + dp - 1) / dp;
    const int64_t shard_start = dp_rank * shard_size_;
    const Device device = ops_->device();
    flat_ = Tensor::Zeros({shard_size_ * dp}, MemoryCategory::kGrads, DType::kFloat32, device);
    shard_grad_ = Tensor::Zeros({shard_size_}, MemoryCategory::kGrads, DType::kFloat32, device);
    shard_param_ =
        Tensor::Zeros({shard_size_}, MemoryCategory::kOptimizer, DType::kFloat32, device);

    int64_t offset = 0;
    std::vector<OptimizerSegment> segments;
    for (const Parameter* p : params_.all) {
      const int64_t lo = std::max(offset, shard_start);
      const int64_t hi = std::min(offset + p->value.numel(), shard_start + shard_size_);
      if (lo < hi) {
        segments.push_back({shard_param_.data() + (lo - shard_start),
                            shard_grad_.data() + (lo - shard_start), hi - lo, p->weight_decay, p,
                            lo - offset});
        counts_toward_norm_.push_back(CountsTowardNorm(*p, params_, context_));
      }
      offset += p->value.numel();
    }
    segments_ = segments;
    optimizer_ = std::make_unique<Optimizer>(config.optimizer(), std::move(segments), ops_);
    ParametersLoaded();  // the master copy starts as the parameters' values
  }

  absl::Status ReduceGradients() override {
    // Sums over TP (sequence parallel) and the embedding group commute with the DP
    // sum; done first here, as the reduce-scatter leaves only the shard's sums.
    RETURN_IF_ERROR(ReduceSharedGradients(params_.all, context_));
    PackGradients(params_.all, &flat_);
    return context_.dp().ReduceScatterSum(flat_.data(), shard_size_, shard_grad_.data());
  }

  absl::StatusOr<double> GradNorm() override {
    std::vector<FloatArray> counted;
    for (size_t i = 0; i < segments_.size(); ++i) {
      if (counts_toward_norm_[i]) counted.push_back({segments_[i].grad, segments_[i].n});
    }
    double squares = ops_->SumOfSquares(counted);
    RETURN_IF_ERROR(context_.dp().AllReduceSum(&squares, 1));  // the shards' squares
    return FinishNorm(squares, context_);
  }

  absl::Status Step(double grad_norm, double lr) override {
    ClipGradients(*ops_, segments_, grad_norm, clip_grad_);
    optimizer_->Step(lr);
    RETURN_IF_ERROR(context_.dp().AllGather(shard_param_.data(), shard_size_, flat_.data()));
    UnpackValues(flat_, params_.all);
    return absl::OkStatus();
  }

  Optimizer& optimizer() override { return *optimizer_; }

  void ParametersLoaded() override {
    for (const OptimizerSegment& s : segments_) {
      MemoryOf(flat_.device()).Copy(s.param, s.owner->value.data() + s.offset, s.n * sizeof(float));
    }
  }

 private:
  const OptimizerOps* ops_;
  double clip_grad_;
  const RankContext& context_;
  UpdatedParameters params_;
  int64_t shard_size_ = 0;
  Tensor flat_;  // gradients on the way in, parameters on the way out
  Tensor shard_grad_;
  Tensor shard_param_;  // fp32 master copy of the shard
  std::vector<OptimizerSegment> segments_;
  std::vector<bool> counts_toward_norm_;  // per segment
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace

std::unique_ptr<ParameterUpdater> MakeDistributedOptimizer(const Config& config,
                                                           const RankContext& context,
                                                           UpdatedParameters params,
                                                           const OptimizerOps* ops) {
  return std::make_unique<DistributedOptimizer>(config, context, std::move(params), ops);
}

}  // namespace conveyor
