// The DDP updater: every data-parallel rank holds all parameters and optimizer state;
// gradients live in one buffer of buckets of at most --ddp-bucket-size elements
// (trainer/parameter_buckets.h), each summed over DP in place.
//
// With --overlap-grad-reduce a bucket's all-reduce starts, on a communication thread,
// as soon as backward has finished all its parameters (GradientsReady), while the
// backward of the other layers goes on; ReduceGradients then waits for those and
// reduces what is left. Only that thread uses the DP group meanwhile.
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/status_macros.h"
#include "trainer/optimizer.h"
#include "trainer/parameter_buckets.h"
#include "trainer/parameter_updater.h"

namespace conveyor {
namespace {

class ReplicatedUpdater : public ParameterUpdater {
 public:
  ReplicatedUpdater(const Config& config, const RankContext& context, UpdatedParameters params,
                    const OptimizerOps* ops)
      : ops_(ops),
        clip_grad_(config.optimizer().clip_grad()),
        context_(context),
        params_(std::move(params)),
        layout_(MakeBuckets(params_.all, config.parallel().ddp_bucket_size(), /*align=*/1)),
        grads_(AdoptGradients(layout_, ops->device())),
        segments_(WholeParameterSegments(params_.all)),
        optimizer_(config.optimizer(), segments_, ops) {
    if (context_.dp_size() == 1) return;
    overlap_ = config.parallel().overlap_grad_reduce();
    buckets_.resize(layout_.size());
    for (size_t b = 0; b < layout_.size(); ++b) {
      for (const BucketEntry& e : layout_[b].entries) bucket_of_[e.param] = b;
    }
    ResetBuckets();
    if (overlap_) worker_ = std::thread([this] { Communicate(); });
  }

  ~ReplicatedUpdater() override {
    if (!worker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void GradientsReady(const std::vector<Parameter*>& ready) override {
    if (!overlap_) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (Parameter* p : ready) {
      auto it = bucket_of_.find(p);
      if (it == bucket_of_.end() || !reported_.insert(p).second) continue;
      if (--buckets_[it->second].pending > 0) continue;
      buckets_[it->second].launched = true;
      queue_.push_back(it->second);
    }
    wake_.notify_all();
  }

  absl::Status ReduceGradients() override {
    {
      // Wait for the buckets the communication thread took.
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [this] { return queue_.empty() && !busy_; });
    }
    RETURN_IF_ERROR(worker_status_);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      if (!buckets_[b].launched) RETURN_IF_ERROR(ReduceBucket(b));
    }
    ResetBuckets();
    // Sums over TP (sequence parallel) and the embedding group commute with the DP
    // sum, so they may come after it.
    return ReduceSharedGradients(params_.all, context_);
  }

  absl::StatusOr<double> GradNorm() override {
    std::vector<FloatArray> counted;
    for (Parameter* p : params_.all) {
      if (CountsTowardNorm(*p, params_, context_)) {
        counted.push_back({p->grad.data(), p->grad.numel()});
      }
    }
    // Gradients are already equal across DP: only model parallelism splits them.
    return FinishNorm(ops_->SumOfSquares(counted), context_);
  }

  absl::Status Step(double grad_norm, double lr) override {
    ClipGradients(*ops_, segments_, grad_norm, clip_grad_);
    optimizer_.Step(lr);
    return absl::OkStatus();
  }

  Optimizer& optimizer() override { return optimizer_; }

 private:
  // This step's progress of bucket b of layout_.
  struct BucketProgress {
    int pending = 0;        // parameters backward has not finished this step
    bool launched = false;  // handed to the communication thread this step
  };

  absl::Status ReduceBucket(size_t b) {
    return context_.dp().AllReduceSum(grads_.data() + layout_[b].start, layout_[b].size);
  }

  void ResetBuckets() {
    reported_.clear();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      buckets_[b].pending = static_cast<int>(layout_[b].entries.size());
      buckets_[b].launched = false;
    }
  }

  // The communication thread: reduces launched buckets in launch order.
  void Communicate() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      const size_t b = queue_.front();
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      absl::Status status = worker_status_.ok() ? ReduceBucket(b) : worker_status_;
      lock.lock();
      if (!status.ok()) worker_status_ = status;
      busy_ = false;
      done_.notify_all();
    }
  }

  const OptimizerOps* ops_;
  double clip_grad_;
  const RankContext& context_;
  UpdatedParameters params_;
  const std::vector<Bucket> layout_;
  Tensor grads_;  // every parameter's gradient is a view into it (before segments_ point in)
  std::vector<OptimizerSegment> segments_;
  Optimizer optimizer_;
  std::vector<BucketProgress> buckets_;  // by layout_ index
  std::map<const Parameter*, size_t> bucket_of_;
  std::set<const Parameter*> reported_;  // this step
  bool overlap_ = false;
  std::mutex mu_;
  std::condition_variable wake_;  // work for the communication thread
  std::condition_variable done_;  // the communication thread went idle
  std::deque<size_t> queue_;
  bool busy_ = false;
  bool stop_ = false;
  absl::Status worker_status_;  // first error of the communication thread
  std::thread worker_;
};

}  // namespace

std::unique_ptr<ParameterUpdater> MakeReplicatedUpdater(const Config& config,
                                                        const RankContext& context,
                                                        UpdatedParameters params,
                                                        const OptimizerOps* ops) {
  return std::make_unique<ReplicatedUpdater>(config, context, std::move(params), ops);
}

}  // namespace conveyor
