// The DDP updater: every data-parallel rank holds all parameters and optimizer state;
// gradients are summed over DP in buckets of at most --ddp-bucket-size elements.
#include <cstring>

#include "runtime/status_macros.h"
#include "trainer/optimizer.h"
#include "trainer/parameter_updater.h"

namespace conveyor {
namespace {

class ReplicatedUpdater : public ParameterUpdater {
 public:
  ReplicatedUpdater(const Config& config, std::vector<Parameter*> params,
                    GradientGroups groups)
      : clip_grad_(config.optimizer().clip_grad()),
        params_(std::move(params)),
        groups_(std::move(groups)),
        segments_(WholeParameterSegments(params_)),
        optimizer_(config.optimizer(), segments_) {
    if (groups_.dp == nullptr || groups_.dp->size() == 1) return;
    const int64_t bucket_elements = config.parallel().ddp_bucket_size();
    std::vector<Parameter*> pending;
    int64_t elements = 0;
    auto close = [&] {
      if (pending.empty()) return;
      buckets_.push_back({pending, Tensor::Zeros({elements}, MemoryCategory::kGrads)});
      pending.clear();
      elements = 0;
    };
    for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
      if (elements > 0 && elements + (*it)->grad.numel() > bucket_elements) close();
      pending.push_back(*it);
      elements += (*it)->grad.numel();
    }
    close();
  }

  absl::Status ReduceGradients() override {
    RETURN_IF_ERROR(ReduceSharedGradients(params_, groups_));
    for (Bucket& bucket : buckets_) {
      float* flat = bucket.flat.data();
      for (Parameter* p : bucket.params) {
        std::memcpy(flat, p->grad.data(), p->grad.nbytes());
        flat += p->grad.numel();
      }
      RETURN_IF_ERROR(groups_.dp->AllReduceSum(bucket.flat.data(), bucket.flat.numel()));
      flat = bucket.flat.data();
      for (Parameter* p : bucket.params) {
        std::memcpy(p->grad.data(), flat, p->grad.nbytes());
        flat += p->grad.numel();
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> GradNorm() override {
    double squares = 0.0;
    for (const Parameter* p : params_) {
      if (!CountsTowardNorm(*p, groups_)) continue;
      const float* g = p->grad.data();
      for (int64_t i = 0; i < p->grad.numel(); ++i) squares += static_cast<double>(g[i]) * g[i];
    }
    // Gradients are already equal across DP: only model parallelism splits them.
    return FinishNorm(squares, nullptr, groups_);
  }

  absl::Status Step(double grad_norm, double lr) override {
    ClipGradients(segments_, grad_norm, clip_grad_);
    optimizer_.Step(lr);
    return absl::OkStatus();
  }

  Optimizer& optimizer() override { return optimizer_; }

 private:
  struct Bucket {
    std::vector<Parameter*> params;
    Tensor flat;
  };
  double clip_grad_;
  std::vector<Parameter*> params_;
  GradientGroups groups_;
  std::vector<OptimizerSegment> segments_;
  Optimizer optimizer_;
  std::vector<Bucket> buckets_;
};

}  // namespace

std::unique_ptr<ParameterUpdater> MakeReplicatedUpdater(const Config& config,
                                                        std::vector<Parameter*> params,
                                                        GradientGroups groups) {
  return std::make_unique<ReplicatedUpdater>(config, std::move(params), std::move(groups));
}

}  // namespace conveyor
