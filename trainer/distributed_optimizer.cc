// The distributed optimizer (ZeRO stage 1, Megatron's --use-distributed-optimizer), at
// Megatron's bytes per parameter.
//
// The parameters' gradients, and their values, live in bucketed buffers whose buckets
// are padded to a multiple of DP (trainer/parameter_buckets.h). Data-parallel rank r
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
// pieces; its weight decay travels with each piece.
#include <algorithm>

#include "base/status_macros.h"
#include "trainer/optimizer.h"
#include "trainer/parameter_buckets.h"
#include "trainer/parameter_updater.h"

namespace conveyor {
namespace {

// The buffers of one kind of parameter.
struct ShardedGroup {
  bool bf16_values = false;
  std::vector<Bucket> buckets;
  Tensor grads;   // fp32, each parameter's grad a view into it
  Tensor values;  // fp32 (each value a view) or bf16 (each compute copy a view)
  Tensor master;  // bf16_values: fp32 values of the owned slices, bucket after bucket
};

class DistributedOptimizer : public ParameterUpdater {
 public:
  DistributedOptimizer(const Config& config, const RankContext& context, UpdatedParameters params,
                       const OptimizerOps* ops)
      : ops_(ops),
        clip_grad_(config.optimizer().clip_grad()),
        context_(context),
        params_(std::move(params)) {
    std::vector<Parameter*> fp32_values, bf16_values;
    for (Parameter* p : params_.all) {
      (p->compute.empty() ? fp32_values : bf16_values).push_back(p);
    }
    const int64_t bucket_elements = config.parallel().ddp_bucket_size();
    std::vector<OptimizerSegment> segments;
    for (const bool bf16 : {false, true}) {
      const std::vector<Parameter*>& members = bf16 ? bf16_values : fp32_values;
      if (members.empty()) continue;
      groups_.push_back(MakeGroup(members, bf16, bucket_elements, &segments));
    }
    segments_ = segments;
    optimizer_ = std::make_unique<Optimizer>(config.optimizer(), std::move(segments), ops_);
  }

  absl::Status ReduceGradients() override {
    // Sums over TP (sequence parallel) and the embedding group commute with the DP
    // sum; done first here, as the reduce-scatter leaves only the owned slices' sums.
    RETURN_IF_ERROR(ReduceSharedGradients(params_.all, context_));
    for (ShardedGroup& group : groups_) {
      for (const Bucket& bucket : group.buckets) {
        float* first = group.grads.data() + bucket.start;
        const int64_t slice = bucket.size / dp();
        RETURN_IF_ERROR(
            context_.dp().ReduceScatterSum(first, slice, first + context_.dp().rank() * slice));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> GradNorm() override {
    std::vector<FloatArray> counted;
    for (size_t i = 0; i < segments_.size(); ++i) {
      if (counts_toward_norm_[i]) counted.push_back({segments_[i].grad, segments_[i].n});
    }
    double squares = ops_->SumOfSquares(counted);
    RETURN_IF_ERROR(context_.dp().AllReduceSum(&squares, 1));  // the slices' squares
    return FinishNorm(squares, context_);
  }

  absl::Status Step(double grad_norm, double lr) override {
    ClipGradients(*ops_, segments_, grad_norm, clip_grad_);
    optimizer_->Step(lr);
    return GatherValues();
  }

  Optimizer& optimizer() override { return *optimizer_; }

  absl::Span<MasterPiece> MasterPieces() override { return absl::MakeSpan(master_pieces_); }

  absl::Status ParametersLoaded() override { return GatherValues(); }

 private:
  int dp() const { return context_.dp().size(); }

  // Lays out `members`' buffers, moves their gradients and values in, and appends the
  // owned slices' optimizer segments.
  ShardedGroup MakeGroup(const std::vector<Parameter*>& members, bool bf16, int64_t bucket_elements,
                         std::vector<OptimizerSegment>* segments) {
    const Device device = ops_->device();
    ShardedGroup g;
    g.bf16_values = bf16;
    // bf16 slices of an even length travel as fp32 words (GatherValues).
    g.buckets = MakeBuckets(members, bucket_elements, bf16 ? 2 * dp() : dp());
    g.grads = AdoptGradients(g.buckets, device);
    if (bf16) {
      g.values = AdoptTensors(g.buckets, DType::kBFloat16, device,
                              [](Parameter& p) -> Tensor& { return p.compute; });
      g.master = Tensor::Zeros({BufferElements(g.buckets) / dp()}, MemoryCategory::kOptimizer,
                               DType::kFloat32, device);
    } else {
      g.values = AdoptTensors(g.buckets, DType::kFloat32, device,
                              [](Parameter& p) -> Tensor& { return p.value; });
    }
    int64_t master_start = 0;  // of the current bucket's slice
    for (const Bucket& bucket : g.buckets) {
      const int64_t slice = bucket.size / dp();
      const int64_t owned = bucket.start + context_.dp().rank() * slice;
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

  // Every rank's owned slices into every rank's values (bf16 ones first rounded from the
  // master shard).
  absl::Status GatherValues() {
    for (ShardedGroup& group : groups_) {
      int64_t master_start = 0;
      for (const Bucket& bucket : group.buckets) {
        const int64_t slice = bucket.size / dp();
        const int64_t owned = bucket.start + context_.dp().rank() * slice;
        if (group.bf16_values) {
          auto* values = static_cast<BFloat16*>(group.values.raw());
          ops_->RoundToBFloat16(group.master.data() + master_start, values + owned, slice);
          // bf16 pairs travel as fp32 words: a gather only moves bytes, and every bf16
          // bucket is padded to a multiple of 2 * DP, so a slice has whole pairs.
          RETURN_IF_ERROR(context_.dp().AllGather(
              reinterpret_cast<const float*>(values + owned), slice / 2,
              reinterpret_cast<float*>(values + bucket.start)));
        } else {
          float* values = group.values.data();
          RETURN_IF_ERROR(context_.dp().AllGather(values + owned, slice, values + bucket.start));
        }
        master_start += slice;
      }
    }
    return absl::OkStatus();
  }

  const OptimizerOps* ops_;
  double clip_grad_;
  const RankContext& context_;
  UpdatedParameters params_;
  std::vector<ShardedGroup> groups_;
  std::vector<OptimizerSegment> segments_;
  std::vector<bool> counts_toward_norm_;  // per segment
  std::vector<MasterPiece> master_pieces_;
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
