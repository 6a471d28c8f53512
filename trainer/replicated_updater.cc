// The DDP updater: every data-parallel rank holds all parameters and optimizer state;
// gradients are summed over DP in buckets of at most --ddp-bucket-size elements.
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
        segments_(WholeParameterSegments(params_.all)),
        optimizer_(config.optimizer(), segments_, ops) {
    if (context_.dp_size() == 1) return;
    overlap_ = config.parallel().overlap_grad_reduce();
    const int64_t bucket_elements = config.parallel().ddp_bucket_size();
    std::vector<Parameter*> pending;
    int64_t elements = 0;
    auto close = [&] {
      if (pending.empty()) return;
      buckets_.push_back({pending, Tensor::Zeros({elements}, MemoryCategory::kGrads,
                                                 DType::kFloat32, ops_->device())});
      pending.clear();
      elements = 0;
    };
    for (auto it = params_.all.rbegin(); it != params_.all.rend(); ++it) {
      if (elements > 0 && elements + (*it)->grad.numel() > bucket_elements) close();
      pending.push_back(*it);
      elements += (*it)->grad.numel();
    }
    close();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      for (Parameter* p : buckets_[b].params) bucket_of_[p] = b;
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
    for (Bucket& bucket : buckets_) {
      if (!bucket.launched) RETURN_IF_ERROR(ReduceBucket(bucket));
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
  struct Bucket {
    std::vector<Parameter*> params;
    Tensor flat;
    int pending = 0;        // parameters backward has not finished this step
    bool launched = false;  // handed to the communication thread this step
  };

  absl::Status ReduceBucket(Bucket& bucket) {
    PackGradients(bucket.params, &bucket.flat);
    RETURN_IF_ERROR(context_.dp().AllReduceSum(bucket.flat.data(), bucket.flat.numel()));
    UnpackGradients(bucket.flat, bucket.params);
    return absl::OkStatus();
  }

  void ResetBuckets() {
    reported_.clear();
    for (Bucket& bucket : buckets_) {
      bucket.pending = static_cast<int>(bucket.params.size());
      bucket.launched = false;
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
      absl::Status status = worker_status_.ok() ? ReduceBucket(buckets_[b]) : worker_status_;
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
  std::vector<OptimizerSegment> segments_;
  Optimizer optimizer_;
  std::vector<Bucket> buckets_;
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
