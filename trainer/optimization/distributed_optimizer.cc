// The distributed optimizer (ZeRO stage 1, Megatron's --use-distributed-optimizer), at
// Megatron's bytes per parameter.
//
// The parameters' gradients, and their values, live in bucketed buffers whose buckets
// are padded to a multiple of DP (trainer/optimization/parameter_buckets.h). Data-parallel rank r
// owns slice r of every bucket, S = bucket size / DP elements:
//   reduce-scatter  each bucket's gradients, in place: slice r ends as the DP sum
//   norm            squares over the owned slices, summed over DP and model parallelism
//   step            clip, then update the owned slices' fp32 values with their
//                   optimizer state (1/DP of the replicated optimizer's)
//   all-gather      every rank's updated slices into every rank's values, in place
// Two kinds of parameter, each in buffers of its own:
//  - fp32 values (fp32 training, and the parameters ops read in fp32 under --bf16: norm
//    weights, biases, learned positions): the value buffer is its own master; the owned
//    slice is updated in place. 4 + 4 + 8/DP bytes per parameter with Adam, as
//    Megatron's fp32 case.
//  - bf16 values (under --bf16, Parameter::read_in_compute_type: GEMM weights and the
//    embedding table): the value buffer holds the bf16 copies ops read, and only the
//    owned slices have fp32 values, in a master shard, rounded into the bf16 slice after
//    each step. 2 + 4 + 12/DP bytes, Megatron's 6 + 12/DP.
// A parameter that straddles slices is updated piecewise by the ranks that own its
// pieces; its weight decay travels with each piece. Under expert parallelism the routed
// experts' parameters (Parameter::expert_parallel) have buffers of their own of each
// kind, sharded over the expert-data-parallel group instead of DP x CP (Megatron's
// expert-parallel buffers); norms still sum the owned slices over DP x CP, then TP x PP
// (FinishNorm): over the whole job, which holds every expert slice once (each is owned by
// one rank of its expert-data-parallel group, whatever the expert TP).
//
// Overlap, as Megatron's: --overlap-grad-reduce starts a bucket's reduce-scatter on a
// communication thread once backward has finished its parameters (except buckets whose
// gradients still take a sum over TP or the embedding group, which must come first);
// --overlap-param-gather starts the all-gathers after the step, the first layers'
// buckets first, and the next forward waits for a bucket only when it reads it.
#include <algorithm>
#include <map>
#include <memory>

#include "base/status_macros.h"
#include "parallel/tensor_buffer.h"
#include "trainer/optimization/communication_thread.h"
#include "trainer/optimization/gradient_reduction.h"
#include "trainer/optimization/optimizer.h"
#include "trainer/optimization/parameter_buckets.h"
#include "trainer/optimization/parameter_updater.h"

namespace conveyor {
namespace {

// The buffers of one kind of parameter.
struct ShardedGroup {
  bool bf16_values = false;
  Communicator* replicas = nullptr;  // the ranks sharing these parameters, one slice each
  GradientReduction* reduction = nullptr;  // over `replicas`, shared by its groups
  std::vector<Bucket> buckets;
  Tensor grads;   // fp32, each parameter's grad a view into it
  Tensor values;  // fp32 (each value a view) or bf16 (each compute copy a view)
  Tensor master;  // bf16_values: fp32 values of the owned slices, bucket after bucket
  std::vector<int64_t> master_starts;  // per bucket
};

class DistributedOptimizer : public ParameterUpdater {
 public:
  DistributedOptimizer(const ResolvedConfig& resolved, const RankContext& context,
                       UpdatedParameters params, const OptimizerOps* ops)
      : ops_(ops),
        clip_grad_(resolved.config().optimizer().clip_grad()),
        context_(context),
        params_(std::move(params)) {
    const ParallelConfig& parallel = resolved.config().parallel();
    const int64_t bucket_elements = parallel.ddp_bucket_size();
    std::vector<OptimizerSegment> segments;
    for (const bool expert_parallel : {false, true}) {
      for (const bool bf16 : {false, true}) {
        std::vector<Parameter*> members;
        for (Parameter* p : params_.all) {
          if (p->expert_parallel == expert_parallel && p->compute.empty() != bf16) {
            members.push_back(p);
          }
        }
        if (members.empty()) continue;
        groups_.push_back(MakeGroup(members, bf16, bucket_elements, &segments));
        sharded_ = sharded_ || groups_.back().replicas->size() > 1;
      }
    }
    optimizer_ = std::make_unique<Optimizer>(resolved.config().optimizer(), resolved.optimizer(),
                                             std::move(segments), ops_);
    // One reduction (and one bf16 staging buffer, for the largest bucket) per group of
    // ranks.
    std::map<Communicator*, int64_t> largest;
    for (const ShardedGroup& g : groups_) {
      largest[g.replicas] = std::max(largest[g.replicas], LargestBucket(g.buckets));
    }
    std::map<Communicator*, GradientReduction*> reduction_of;
    for (const auto& [replicas, size] : largest) {
      reductions_.push_back(std::make_unique<GradientReduction>(
          *replicas, *ops_, parallel.grad_reduce_in_bf16(), size));
      reduction_of[replicas] = reductions_.back().get();
    }
    for (ShardedGroup& g : groups_) g.reduction = reduction_of[g.replicas];

    std::vector<Bucket> all;
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (size_t b = 0; b < groups_[g].buckets.size(); ++b) {
        const Bucket& bucket = groups_[g].buckets[b];
        bool early = true;
        for (const BucketEntry& e : bucket.entries) {
          early = early && !TakesSharedSum(*e.param, context_);
        }
        buckets_.push_back({g, b, early});
        all.push_back(bucket);
      }
    }
    readiness_ = std::make_unique<BucketReadiness>(all);
    overlap_grad_reduce_ = parallel.overlap_grad_reduce() && sharded_;
    overlap_param_gather_ = parallel.overlap_param_gather() && sharded_;
    if (overlap_grad_reduce_ || overlap_param_gather_) {
      overlap_ = std::make_unique<CommunicationThread>([this](size_t job) {
        return job < buckets_.size() ? ReduceBucket(job) : GatherBucket(job - buckets_.size());
      });
    }
  }

  void GradientsReady(const std::vector<Parameter*>& ready) override {
    if (!overlap_grad_reduce_) return;
    for (const size_t k : readiness_->Complete(ready)) {
      if (buckets_[k].early) overlap_->Launch(k);
    }
  }

  absl::Status ReduceGradients() override {
    if (overlap_ != nullptr) RETURN_IF_ERROR(overlap_->WaitAll());
    // Sums over TP (sequence parallel) and the embedding group commute with the DP
    // sum; done first here, as the reduce-scatter leaves only the owned slices' sums.
    RETURN_IF_ERROR(ReduceSharedGradients(params_.all, context_, *ops_));
    for (size_t k = 0; k < buckets_.size(); ++k) {
      if (overlap_ == nullptr || !overlap_->Launched(k)) RETURN_IF_ERROR(ReduceBucket(k));
    }
    if (overlap_ != nullptr) overlap_->Forget();
    readiness_->Reset();
    return absl::OkStatus();
  }

  absl::StatusOr<double> GradNorm() override {
    ASSIGN_OR_RETURN(const double squares,
                     SumOverDataParallel(ops_->SumOfSquares(Counted(&OptimizerSegment::grad))));
    return FinishNorm(squares, context_);
  }
  // From the owned slices' fp32 values (the master, under bf16). Its DP sum waits for
  // --overlap-param-gather's gathers, which use the DP group on the other thread.
  absl::StatusOr<double> ParamsNorm() override {
    RETURN_IF_ERROR(ParametersCurrent());
    ASSIGN_OR_RETURN(const double squares,
                     SumOverDataParallel(ops_->SumOfSquares(Counted(&OptimizerSegment::param))));
    return FinishNorm(squares, context_);
  }
  absl::StatusOr<int64_t> GradZeros() override {
    ASSIGN_OR_RETURN(const double zeros,
                     SumOverDataParallel(ops_->CountZeros(Counted(&OptimizerSegment::grad))));
    return FinishCount(static_cast<int64_t>(zeros), context_);
  }

  absl::Status Step(double grad_norm, const StepLearningRates& lr) override {
    optimizer_->Step(lr, ClipCoefficient(grad_norm, clip_grad_));
    if (!overlap_param_gather_) return GatherValues();
    // The first layers' buckets first: buckets hold the parameters in reverse order.
    for (size_t k = buckets_.size(); k-- > 0;) overlap_->Launch(buckets_.size() + k);
    return absl::OkStatus();
  }

  absl::Status ParametersNeeded(const std::vector<Parameter*>& params) override {
    if (!overlap_param_gather_) return absl::OkStatus();
    for (const Parameter* p : params) {
      const int64_t k = readiness_->BucketOf(p);
      if (k >= 0) RETURN_IF_ERROR(overlap_->Wait(buckets_.size() + k));
    }
    return absl::OkStatus();
  }

  absl::Status ParametersCurrent() override {
    return overlap_ != nullptr ? overlap_->WaitAll() : absl::OkStatus();
  }

  Optimizer& optimizer() override { return *optimizer_; }

  absl::Span<MasterPiece> MasterPieces() override { return absl::MakeSpan(master_pieces_); }

  absl::Status ParametersLoaded() override {
    RETURN_IF_ERROR(ParametersCurrent());
    return GatherValues();
  }

 private:
  // A bucket of one of the groups, in the order of all groups' buckets.
  struct BucketRef {
    size_t group, index;
    bool early;  // may be reduced before ReduceGradients (--overlap-grad-reduce)
  };


  // The owned slices' `array`s that count toward norms.
  template <typename Array>
  std::vector<FloatArray> Counted(Array OptimizerSegment::*array) const {
    std::vector<FloatArray> counted;
    const std::vector<OptimizerSegment>& segments = optimizer_->segments();
    for (size_t i = 0; i < segments.size(); ++i) {
      if (counts_toward_norm_[i]) counted.push_back({segments[i].*array, segments[i].n});
    }
    return counted;
  }

  // The slices' sum over DP.
  absl::StatusOr<double> SumOverDataParallel(double local) {
    RETURN_IF_ERROR(context_.dp_cp().AllReduceSum(&local, 1));
    return local;
  }
  // The first element of this rank's slice of `bucket` of `group`.
  static int64_t Owned(const ShardedGroup& group, const Bucket& bucket) {
    return bucket.start + group.replicas->rank() * (bucket.size / group.replicas->size());
  }

  absl::Status ReduceBucket(size_t k) {
    ShardedGroup& group = groups_[buckets_[k].group];
    const Bucket& bucket = group.buckets[buckets_[k].index];
    return group.reduction->ReduceScatter(group.grads, bucket.start, bucket.size);
  }

  // Rounds the owned slice from the master (bf16 values), then gathers every rank's.
  absl::Status GatherBucket(size_t k) {
    ShardedGroup& group = groups_[buckets_[k].group];
    const Bucket& bucket = group.buckets[buckets_[k].index];
    const int64_t slice = bucket.size / group.replicas->size();
    const int64_t owned = Owned(group, bucket);
    const Buffer values = TensorBuffer(group.values);
    if (group.bf16_values) {
      ops_->RoundToBFloat16(group.master.data() + group.master_starts[buckets_[k].index],
                            static_cast<BFloat16*>(values.Slice(owned, slice).data), slice);
    }
    return group.replicas->AllGather(values.Slice(owned, slice),
                                     values.Slice(bucket.start, bucket.size));
  }

  absl::Status GatherValues() {
    for (size_t k = 0; k < buckets_.size(); ++k) RETURN_IF_ERROR(GatherBucket(k));
    return absl::OkStatus();
  }

  // Lays out `members`' buffers, moves their gradients and values in, and appends the
  // owned slices' optimizer segments.
  ShardedGroup MakeGroup(const std::vector<Parameter*>& members, bool bf16, int64_t bucket_elements,
                         std::vector<OptimizerSegment>* segments) {
    const Device device = ops_->device();
    ShardedGroup g;
    g.bf16_values = bf16;
    g.replicas = &context_.replicas(*members.front());
    const int shards = g.replicas->size();
    g.buckets = MakeBuckets(members, bucket_elements, shards);
    g.grads = AdoptGradients(g.buckets, device);
    if (bf16) {
      g.values = AdoptTensors(g.buckets, DType::kBFloat16, device,
                              [](Parameter& p) -> Tensor& { return p.compute; });
      g.master = Tensor::Zeros({BufferElements(g.buckets) / shards}, MemoryCategory::kOptimizer,
                               DType::kFloat32, device);
    } else {
      g.values = AdoptTensors(g.buckets, DType::kFloat32, device,
                              [](Parameter& p) -> Tensor& { return p.value; });
    }
    int64_t master_start = 0;  // of the current bucket's slice
    for (const Bucket& bucket : g.buckets) {
      g.master_starts.push_back(master_start);
      const int64_t slice = bucket.size / shards;
      const int64_t owned = Owned(g, bucket);
      for (const BucketEntry& e : bucket.entries) {
        const int64_t lo = std::max(e.start, owned);
        const int64_t hi = std::min(e.start + e.param->local_numel(), owned + slice);
        if (lo >= hi) continue;
        float* grad = g.grads.data() + lo;
        float* param = bf16 ? g.master.data() + master_start + (lo - owned) : g.values.data() + lo;
        segments->push_back({param, grad, hi - lo, e.param->weight_decay, e.param, lo - e.start});
        counts_toward_norm_.push_back(CountsTowardNorm(*e.param, params_, context_));
        if (bf16) {
          Tensor piece = g.master.View(master_start + (lo - owned), {hi - lo});
          MemoryOf(device).Copy(piece.data(), e.param->value.data() + (lo - e.start),
                                piece.nbytes());
          master_pieces_.push_back({e.param, lo - e.start, piece});
        }
      }
      master_start += slice;
    }
    if (bf16) {
      // From here on the master shard holds these parameters' fp32 values.
      for (Parameter* p : members) p->value = Tensor();
    }
    return g;
  }

  const OptimizerOps* ops_;
  double clip_grad_;
  const RankContext& context_;
  UpdatedParameters params_;
  std::vector<ShardedGroup> groups_;
  std::vector<bool> counts_toward_norm_;  // per segment
  std::vector<MasterPiece> master_pieces_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<BucketRef> buckets_;  // all groups' buckets
  std::unique_ptr<BucketReadiness> readiness_;
  std::vector<std::unique_ptr<GradientReduction>> reductions_;  // the groups' reductions
  bool sharded_ = false;  // some group has more than one rank
  bool overlap_grad_reduce_ = false, overlap_param_gather_ = false;
  // Jobs: reduce-scatter bucket k (id k), all-gather bucket k (id buckets_.size() + k).
  std::unique_ptr<CommunicationThread> overlap_;
};

}  // namespace

std::unique_ptr<ParameterUpdater> MakeDistributedOptimizer(const ResolvedConfig& config,
                                                           const RankContext& context,
                                                           UpdatedParameters params,
                                                           const OptimizerOps* ops) {
  return std::make_unique<DistributedOptimizer>(config, context, std::move(params), ops);
}

}  // namespace conveyor
