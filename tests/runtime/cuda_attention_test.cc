// Attention and RoPE of the CUDA backend against the CPU reference, in fp32 and bf16
// (tests/runtime/cuda_backend_testing.h): the built-in flash-style kernels and cuDNN's
// fused attention, each against the CPU and against each other (saved log-sum-exps and
// each path's backward from the other's forward). Needs a GPU, except the check that
// cuDNN accepts every graph the GPU test builds, which runs anywhere. Shapes with a
// v_head_dim are multi-latent attention's: value heads (and the context's) narrower or
// wider than the query and key heads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/op_params.h"
#include "runtime/philox.h"
#include "tests/runtime/cuda_backend_testing.h"

namespace conveyor::testing_util {
namespace {

INSTANTIATE_TEST_SUITE_P(ComputeDType, CudaBackendTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& test) {
                           return std::string(DTypeName(test.param));
                         });

// ---------------------------------------------------------------------------------------
// RoPE and attention over the fused, grouped QKV layout.

std::string AttentionName(const AttentionShape& s) {
  return absl::StrCat("batch=", s.batch, " seq=", s.seq, " groups=", s.groups,
                      " heads/group=", s.heads_per_group, " head_dim=", s.head_dim,
                      s.v_head_dim > 0 ? absl::StrCat(" v_head_dim=", s.v_head_dim) : "");
}

// Names an element of a [batch * seq, qkv_width] tensor by sample, position, head part.
Locator QkvLocator(const AttentionShape& s) {
  return [s](int64_t index) {
    const int64_t token = index / s.qkv_width(), col = index % s.qkv_width();
    const int64_t g = col / s.group_width(), in_group = col % s.group_width();
    const int64_t slot = std::min(in_group / s.head_dim, s.heads_per_group + 1);
    const int64_t dim = in_group - slot * s.head_dim;
    const std::string part =
        slot < s.heads_per_group
            ? absl::StrCat("q of head ", g * s.heads_per_group + slot)
            : absl::StrCat(slot == s.heads_per_group ? "k" : "v", " of group ", g);
    return absl::StrCat("token ", token, " (sample ", token / s.seq, ", pos ", token % s.seq, "), ",
                        part, ", dim ", dim);
  };
}

// Names an element of ctx [batch * seq, heads * value_dim].
Locator ContextLocator(const AttentionShape& s) {
  return [s](int64_t index) {
    const int64_t width = s.context_width();
    const int64_t token = index / width, col = index % width;
    return absl::StrCat("token ", token, " (sample ", token / s.seq, ", pos ", token % s.seq,
                        "), head ", col / s.value_dim(), ", dim ", col % s.value_dim());
  };
}

TEST_P(CudaBackendTest, RotateQueriesAndKeys) {
  const std::vector<AttentionShape> shapes = {
      {1, 1, 1, 1, 2},
      {2, 7, 2, 3, 16},
      {2, 37, 1, 4, 64},
      {1, 130, 2, 2, 128},
      {2, 9, 3, 1, 12, 8}};  // multi-latent: the value heads' width moves the next group
  uint32_t seed = 900;
  for (const AttentionShape& s : shapes) {
    const RopeTable table(s.seq, s.head_dim, 10000.0f);
    const Shape qs{s.batch * s.seq, s.qkv_width()};
    // Positions restarting mid-sample (a reset after an eod at index seq / 2).
    std::vector<int32_t> positions(qs[0]);
    for (int64_t t = 0; t < qs[0]; ++t) {
      const int64_t j = t % s.seq;
      positions[t] = static_cast<int32_t>(j < s.seq / 2 + 1 ? j : j - (s.seq / 2 + 1));
    }
    for (const bool inverse : {false, true}) {
      const Values qkv = Act(qs[0] * qs[1], seed++);
      Tensor want = HostTensor(qs, qkv);
      cpu().RotateQueriesAndKeys(table, s, positions, inverse, &want);
      Tensor got = Dev(qs, qkv);
      gpu().RotateQueriesAndKeys(table, s, positions, inverse, &got);
      Check(Name("RotateQueriesAndKeys", AttentionName(s) + (inverse ? " inverse" : "")),
            ValuesOf(got), ValuesOf(want), tol(), QkvLocator(s));
    }
  }
}

struct AttentionCase {
  AttentionShape shape;
  float dropout_p;
  bool documents = false;  // --reset-attention-mask: documents of 1 to 40 tokens
  int64_t window = -1;     // --window-size (window, 0); -1: none
};

// Document starts [batch * seq] for documents of varied lengths (one token included),
// different in every sample.
std::vector<int32_t> DocumentStarts(const AttentionShape& s) {
  std::vector<int32_t> starts(s.batch * s.seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    int64_t start = 0, length = 1 + b;
    for (int64_t i = 0; i < s.seq; ++i) {
      if (i - start == length) {
        start = i;
        length = length * 7 % 40 + 1;
      }
      starts[b * s.seq + i] = static_cast<int32_t>(start);
    }
  }
  return starts;
}

TEST_P(CudaBackendTest, Attention) {
  const std::vector<AttentionCase> cases = {
      {{1, 1, 1, 1, 8}, 0.0f},      // one token
      {{2, 37, 2, 3, 16}, 0.0f},    // GQA, seq not a multiple of the 32-row tile
      {{1, 64, 1, 4, 64}, 0.0f},    // multi-query
      {{2, 100, 2, 1, 24}, 0.0f},   // multi-head, odd head_dim
      {{1, 130, 1, 2, 128}, 0.0f},  // head_dim 128 (over 48 KiB of shared memory)
      {{1, 33, 1, 1, 256}, 0.0f},   // largest head_dim
      {{2, 45, 2, 2, 32}, 0.1f},    // attention dropout, on a tensor-parallel slice
      {{2, 512, 4, 2, 64}, 0.0f},   // a layer-sized case
      {{2, 100, 2, 2, 64}, 0.0f, /*documents=*/true},
      {{2, 70, 1, 2, 32}, 0.1f, /*documents=*/true},
      {{1, 70, 1, 2, 32}, 0.0f, false, /*window=*/0},    // each query sees itself alone
      {{2, 200, 2, 2, 32}, 0.0f, false, /*window=*/40},  // whole key tiles skipped
      {{2, 100, 2, 2, 64}, 0.1f, /*documents=*/true, /*window=*/17},
      // Multi-latent attention: one group per head, value heads of their own width.
      {{2, 37, 4, 1, 24, 16}, 0.0f},           // narrower values, seq off the tile
      {{1, 70, 2, 1, 40, 72}, 0.0f},           // wider values: more dims per lane
      {{2, 64, 2, 1, 192, 128}, 0.0f},         // DeepSeek-V3's 192 / 128
      {{2, 45, 2, 1, 32, 24}, 0.1f, true, 9},  // dropout, documents and a window
      {{2, 50, 2, 2, 16, 48}, 0.0f},           // grouped heads too (not MLA's layout)
  };
  uint32_t seed = 1000;
  for (const AttentionCase& c : cases) {
    const AttentionShape& s = c.shape;
    const std::string name =
        AttentionName(s) + (c.dropout_p > 0 ? absl::StrCat(" dropout p=", c.dropout_p) : "") +
        (c.documents ? " documents" : "") +
        (c.window >= 0 ? absl::StrCat(" window ", c.window) : "");
    const std::vector<int32_t> starts = c.documents ? DocumentStarts(s) : std::vector<int32_t>();
    AttentionMask mask;
    mask.document_start = starts;
    mask.window = c.window;
    const CounterRng rng(77, StreamId("attention.dropout"));
    AttentionDropout dropout;
    if (c.dropout_p > 0) {
      // As a tensor-parallel rank holding heads [3, 3 + heads) of heads + 8, in a data-
      // parallel rank whose first sample is sample 5.
      dropout = {&rng, c.dropout_p, /*first_sample=*/5, /*first_head=*/3,
                 /*total_heads=*/s.heads() + 8};
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const Shape qs{s.batch * s.seq, s.qkv_width()}, cs{s.batch * s.seq, s.context_width()};
    const Values qkv = Act(qs[0] * qs[1], seed++, 1.5f);

    Tensor cpu_lse, ctx = HostTensor(cs, Values(cs[0] * cs[1]));
    cpu().AttentionForward(s, HostTensor(qs, qkv), scale, dropout, mask, &cpu_lse, &ctx);
    const Tensor gqkv = Dev(qs, qkv);
    Tensor saved, gctx = DevZeros(cs);
    gpu().AttentionForward(s, gqkv, scale, dropout, mask, &saved, &gctx);
    Check(Name("AttentionForward ctx", name), ValuesOf(gctx), ValuesOf(ctx), attention_tol(),
          ContextLocator(s));

    // Backward: each backend from its own forward (the GPU's saved is the log-sum-exp).
    const Values dctx = Act(cs[0] * cs[1], seed++);
    Tensor dqkv = HostTensor(qs, Values(qkv.size()));
    cpu().AttentionBackward(s, HostTensor(qs, qkv), cpu_lse, ctx, HostTensor(cs, dctx), scale,
                            dropout, mask, &dqkv);
    Tensor gdqkv = DevZeros(qs);
    gpu().AttentionBackward(s, gqkv, saved, gctx, Dev(cs, dctx), scale, dropout, mask, &gdqkv);
    Check(Name("AttentionBackward dqkv", name), ValuesOf(gdqkv), ValuesOf(dqkv), attention_tol(),
          QkvLocator(s));
  }
}

// ---------------------------------------------------------------------------------------
// Attention by both GPU paths: cuDNN's fused kernels (bf16 without dropout, for the shapes
// cuDNN takes) and the built-in ones (a second CudaOps with cuDNN off). Each is checked
// against the CPU; their saved log-sum-exps against each other and against one computed
// here in double; and each backward runs from the other path's forward as well, since the
// two must stay interchangeable (a shape cuDNN declines in one direction only, or a
// recomputed forward). Every case prints which path ran.

// The natural-log log-sum-exp of each scaled, causally masked score row, in double,
// [batch, heads, seq]: what `saved` holds on both GPU paths.
Values ReferenceLogSumExp(const AttentionShape& s, const Values& qkv, float scale) {
  const int64_t w = s.qkv_width(), d = s.head_dim, group = s.group_width();
  Values lse(s.batch * s.heads() * s.seq);
  std::vector<double> row(s.seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads(); ++h) {
      const int64_t g = h / s.heads_per_group;
      const int64_t q_at = g * group + (h % s.heads_per_group) * d;
      const int64_t k_at = g * group + s.heads_per_group * d;
      for (int64_t i = 0; i < s.seq; ++i) {
        const float* q = qkv.data() + (b * s.seq + i) * w + q_at;
        double max = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = qkv.data() + (b * s.seq + j) * w + k_at;
          double dot = 0.0;
          for (int64_t x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * k[x];
          row[j] = scale * dot;
          max = std::max(max, row[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(row[j] - max);
        lse[(b * s.heads() + h) * s.seq + i] = static_cast<float>(max + std::log(sum));
      }
    }
  }
  return lse;
}

// Which path an op took: the cuDNN count before and after it.
std::string PathName(int64_t cudnn_before, int64_t cudnn_after) {
  return cudnn_after > cudnn_before ? "cuDNN" : "built-in";
}

struct PathCase {
  AttentionShape shape;
  float dropout_p;
  bool cudnn;  // in bf16, cuDNN must take it (on a Hopper GPU with cuDNN 9)
};

std::vector<PathCase> PathCases() {
  return {
      {{2, 128, 4, 1, 64}, 0.0f, true},    // multi-head: Q, K, V strided views of qkv
      {{1, 1024, 12, 1, 64}, 0.0f, true},  // a GPT-2 small layer
      {{2, 100, 2, 1, 128}, 0.0f, true},   // seq not a multiple of 64, head_dim 128
      {{1, 64, 1, 4, 64}, 0.0f, true},     // multi-query: Q's heads equally spaced
      {{2, 96, 2, 3, 64}, 0.0f, true},     // grouped-query: Q through a packed copy
      {{2, 45, 2, 1, 32}, 0.1f, false},    // dropout: the built-in kernels, the CPU's mask
      // Multi-latent attention at DeepSeek-V3's head widths, which cuDNN documents for
      // Hopper (d_qk 192, d_v 128): V and O are views of their own head dim.
      {{2, 128, 4, 1, 192, 128}, 0.0f, true},
  };
}

// Ring attention's block ops (context parallelism) against the CPU's: CP 2 of a
// 48-token sample, rank 0 (chunks 0 and 3) against the blocks of both ranks in ring
// order, forward merged into fp32 ctx and lse, backward accumulating dQ and fp32 dK, dV;
// grouped-query heads, and multi-latent attention's (narrower and wider value heads).
TEST_P(CudaBackendTest, RingAttentionBlocks) {
  for (const AttentionShape& s :
       {AttentionShape{2, 24, 2, 2, 32}, AttentionShape{2, 24, 3, 1, 40, 24},
        AttentionShape{1, 24, 2, 1, 16, 48}}) {
    std::vector<int32_t> mine(24), theirs(24);
    for (int32_t i = 0; i < 12; ++i) {
      mine[i] = i;            // chunk 0
      mine[12 + i] = 36 + i;  // chunk 3
      theirs[i] = 12 + i;     // chunks 1 and 2
      theirs[12 + i] = 24 + i;
    }
    uint32_t seed = 1500;
    // A window of 10: chunk 3's queries (positions 36-47) see only the other rank's keys
    // 26-35, and only some of them each.
    const std::pair<bool, int64_t> masks[] = {{false, -1}, {true, -1}, {false, 10}};
    for (const auto& [documents, window] : masks) {
      for (const float p : {0.0f, 0.1f}) {
        const std::string name = absl::StrCat(AttentionName(s), documents ? " documents" : "",
                                              window >= 0 ? absl::StrCat(" window ", window) : "",
                                              p > 0 ? " dropout" : "");
        std::vector<int32_t> starts;
        if (documents) {  // documents start at positions 0, 7, 30 and 40
          for (int64_t b = 0; b < s.batch; ++b) {
            for (const int32_t position : mine) {
              starts.push_back(position >= 40 ? 40 : position >= 30 ? 30 : position >= 7 ? 7 : 0);
            }
          }
        }
        const CounterRng rng(79, StreamId("attention.dropout"));
        AttentionDropout dropout;
        if (p > 0) dropout = {&rng, p, 0, 0, s.heads(), /*sample_length=*/48};
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
        const Shape qs{s.batch * s.seq, s.qkv_width()}, cs{s.batch * s.seq, s.context_width()};
        const Shape ks{s.batch * s.seq, s.kv_width()}, ls{s.batch, s.heads(), s.seq};
        const Values q_mine = Act(qs[0] * qs[1], seed++, 1.5f);
        const Values q_theirs = Act(qs[0] * qs[1], seed++, 1.5f);
        const Values dctx = Act(cs[0] * cs[1], seed++);
        Tensor cpu_ctx = Tensor::Zeros(cs, MemoryCategory::kActivations);
        Tensor cpu_lse = Tensor::Zeros(ls, MemoryCategory::kActivations);
        Tensor gpu_ctx =
            Tensor::Zeros(cs, MemoryCategory::kActivations, DType::kFloat32, Device::kCuda);
        Tensor gpu_lse =
            Tensor::Zeros(ls, MemoryCategory::kActivations, DType::kFloat32, Device::kCuda);
        struct Source {
          const Values* qkv;
          const std::vector<int32_t>* positions;
        };
        const Source ring[2] = {{&q_mine, &mine}, {&q_theirs, &theirs}};
        for (int step = 0; step < 2; ++step) {
          const AttentionMask mask{mine, *ring[step].positions, starts, window};
          Tensor cpu_kv = Tensor::Zeros(ks, MemoryCategory::kActivations);
          cpu().PackKeysValues(s, HostTensor(qs, *ring[step].qkv), &cpu_kv);
          cpu().AttentionBlockForward(s, s.seq, mask, HostTensor(qs, q_mine), cpu_kv, scale,
                                      dropout, step == 0, &cpu_ctx, &cpu_lse);
          Tensor gpu_kv = DevZeros(ks);
          gpu().PackKeysValues(s, Dev(qs, *ring[step].qkv), &gpu_kv);
          Check(Name("PackKeysValues", name), ValuesOf(gpu_kv), ValuesOf(cpu_kv), tol(),
                IndexIn(ks));
          gpu().AttentionBlockForward(s, s.seq, mask, Dev(qs, q_mine), gpu_kv, scale, dropout,
                                      step == 0, &gpu_ctx, &gpu_lse);
        }
        Check(Name("AttentionBlockForward ctx", name), ValuesOf(gpu_ctx), ValuesOf(cpu_ctx),
              attention_tol(), ContextLocator(s));
        Check(Name("AttentionBlockForward lse", name), ValuesOf(gpu_lse), ValuesOf(cpu_lse),
              kFp32AttentionTolerance, IndexIn(ls));

        // Backward from the CPU's ctx and lse, one block at a time.
        const Values ctx_values = ValuesOf(cpu_ctx);
        Tensor cpu_dq = HostTensor(qs, Values(qs[0] * qs[1], 0.0f));
        Tensor gpu_dq = Dev(qs, Values(qs[0] * qs[1], 0.0f));
        Tensor gpu_lse_from_cpu =
            Tensor::Zeros(ls, MemoryCategory::kActivations, DType::kFloat32, Device::kCuda);
        gpu_lse_from_cpu.CopyFrom(cpu_lse);
        for (int step = 0; step < 2; ++step) {
          const AttentionMask mask{mine, *ring[step].positions, starts, window};
          Tensor cpu_kv = Tensor::Zeros(ks, MemoryCategory::kActivations);
          cpu().PackKeysValues(s, HostTensor(qs, *ring[step].qkv), &cpu_kv);
          Tensor cpu_dkv = Tensor::Zeros(ks, MemoryCategory::kActivations);
          cpu().AttentionBlockBackward(s, s.seq, mask, HostTensor(qs, q_mine), cpu_kv,
                                       HostTensor(cs, ctx_values), cpu_lse, HostTensor(cs, dctx),
                                       scale, dropout, &cpu_dq, &cpu_dkv);
          Tensor gpu_kv = DevZeros(ks);
          gpu().PackKeysValues(s, Dev(qs, *ring[step].qkv), &gpu_kv);
          Tensor gpu_dkv =
              Tensor::Zeros(ks, MemoryCategory::kActivations, DType::kFloat32, Device::kCuda);
          gpu().AttentionBlockBackward(s, s.seq, mask, Dev(qs, q_mine), gpu_kv, Dev(cs, ctx_values),
                                       gpu_lse_from_cpu, Dev(cs, dctx), scale, dropout, &gpu_dq,
                                       &gpu_dkv);
          Check(Name("AttentionBlockBackward dkv", absl::StrCat(name, " step ", step)),
                ValuesOf(gpu_dkv), ValuesOf(cpu_dkv), attention_tol(), IndexIn(ks));
          // The key/value gradient lands in its owner's rows.
          Tensor cpu_owner = HostTensor(qs, Values(qs[0] * qs[1], 0.0f));
          cpu().AddKeyValueGrad(s, cpu_dkv, &cpu_owner);
          Tensor gpu_owner = Dev(qs, Values(qs[0] * qs[1], 0.0f));
          gpu().AddKeyValueGrad(s, gpu_dkv, &gpu_owner);
          Check(Name("AddKeyValueGrad", name), ValuesOf(gpu_owner), ValuesOf(cpu_owner),
                attention_tol(), QkvLocator(s));
        }
        Check(Name("AttentionBlockBackward dq", name), ValuesOf(gpu_dq), ValuesOf(cpu_dq),
              attention_tol(), QkvLocator(s));
      }
    }
  }
}

TEST_P(CudaBackendTest, AttentionPathsAgree) {
  const std::vector<PathCase> cases = PathCases();
  std::printf("%s\n", cuda::CudnnAttention::Versions().c_str());
  const CudaOps builtin(dtype(), /*synchronize_each_op=*/true, /*cudnn_attention=*/false);
  uint32_t seed = 1300;
  for (const PathCase& c : cases) {
    const AttentionShape& s = c.shape;
    const std::string name =
        AttentionName(s) + (c.dropout_p > 0 ? absl::StrCat(" dropout p=", c.dropout_p) : "");
    const CounterRng rng(78, StreamId("attention.dropout"));
    AttentionDropout dropout;
    if (c.dropout_p > 0) dropout = {&rng, c.dropout_p, 0, 0, s.heads()};
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const Shape qs{s.batch * s.seq, s.qkv_width()}, cs{s.batch * s.seq, s.context_width()};
    const Shape ls{s.batch, s.heads(), s.seq};
    const Values qkv = Act(qs[0] * qs[1], seed++, 1.5f);
    const Values dctx = Act(cs[0] * cs[1], seed++);

    Tensor cpu_lse, ctx = HostTensor(cs, Values(cs[0] * cs[1]));
    cpu().AttentionForward(s, HostTensor(qs, qkv), scale, dropout, {}, &cpu_lse, &ctx);
    Tensor dqkv = HostTensor(qs, Values(qkv.size()));
    cpu().AttentionBackward(s, HostTensor(qs, qkv), cpu_lse, ctx, HostTensor(cs, dctx), scale,
                            dropout, {}, &dqkv);
    const Values want_ctx = ValuesOf(ctx), want_dqkv = ValuesOf(dqkv);
    const Values want_lse = ReferenceLogSumExp(s, qkv, scale);

    const Tensor gqkv = Dev(qs, qkv), gdctx = Dev(cs, dctx);
    struct Run {
      const CudaOps* ops;
      Tensor saved, ctx;
      std::string forward_path;
    };
    Run runs[2] = {{&gpu(), {}, DevZeros(cs), ""}, {&builtin, {}, DevZeros(cs), ""}};
    for (Run& r : runs) {
      const int64_t before = r.ops->attention_path_counts().cudnn_forward;
      r.ops->AttentionForward(s, gqkv, scale, dropout, {}, &r.saved, &r.ctx);
      r.forward_path = PathName(before, r.ops->attention_path_counts().cudnn_forward);
      const std::string what = absl::StrCat(name, " [", r.forward_path, "]");
      Check(Name("AttentionForward ctx", what), ValuesOf(r.ctx), want_ctx, attention_tol(),
            ContextLocator(s));
      Check(Name("AttentionForward saved", what), ValuesOf(r.saved), want_lse,
            kFp32AttentionTolerance, IndexIn(ls));
    }
    Check(Name("AttentionForward saved, cuDNN-enabled vs built-in", name), ValuesOf(runs[0].saved),
          ValuesOf(runs[1].saved), kFp32AttentionTolerance, IndexIn(ls));

    // Each backend's backward from each forward: (0, 0) and (1, 1) are the plain runs,
    // (0, 1) and (1, 0) cross the paths.
    std::string backward_path;
    for (const Run& from : runs) {
      for (const Run& by : runs) {
        Tensor got = DevZeros(qs);
        const int64_t before = by.ops->attention_path_counts().cudnn_backward;
        by.ops->AttentionBackward(s, gqkv, from.saved, from.ctx, gdctx, scale, dropout, {}, &got);
        const std::string path = PathName(before, by.ops->attention_path_counts().cudnn_backward);
        if (by.ops == &gpu()) backward_path = path;
        EXPECT_TRUE(by.ops == &gpu() || path == "built-in")
            << "cudnn_attention = false still used cuDNN";
        Check(Name("AttentionBackward dqkv",
                   absl::StrCat(name, " [", path, " after a ", from.forward_path, " forward]")),
              ValuesOf(got), want_dqkv, attention_tol(), QkvLocator(s));
      }
    }

    const bool want_cudnn = c.cudnn && dtype() == DType::kBFloat16;
    const std::string want_path = want_cudnn ? "cuDNN" : "built-in";
    std::printf("[path] %s: forward %s, backward %s (expected %s)\n",
                Name("Attention", name).c_str(), runs[0].forward_path.c_str(),
                backward_path.c_str(), want_path.c_str());
    EXPECT_EQ(runs[0].forward_path, want_path)
        << name << ": forward took the wrong path (a cuDNN refusal is explained on stderr)";
    EXPECT_EQ(backward_path, want_path)
        << name << ": backward took the wrong path (a cuDNN refusal is explained on stderr)";
    EXPECT_EQ(runs[1].forward_path, "built-in") << "cudnn_attention = false still used cuDNN";
  }
}

// The cuDNN graphs of every shape the GPU test sends to cuDNN pass the frontend's checks
// (dims, strides, 16-byte alignment of the strided views of qkv) and cuDNN's own
// finalisation of the operation graph, for a Hopper GPU, without a device; a head_dim
// cuDNN cannot take is declined with a reason.
TEST(CudnnAttentionTest, GraphsValidateWithoutADevice) {
  std::printf("%s\n", cuda::CudnnAttention::Versions().c_str());
  for (const PathCase& c : PathCases()) {
    if (!c.cudnn) continue;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.shape.head_dim));
    for (const bool forward : {true, false}) {
      const std::string why =
          cuda::CudnnAttention::CheckWithoutDevice(c.shape, scale, forward, /*sm_version=*/90);
      EXPECT_EQ(why, "") << (forward ? "forward " : "backward ") << AttentionName(c.shape);
    }
  }
  const AttentionShape odd_head_dim{1, 33, 2, 1, 12};
  const std::string why =
      cuda::CudnnAttention::CheckWithoutDevice(odd_head_dim, 0.25f, /*forward=*/true, 90);
  std::printf("head_dim 12 declined: %s\n", why.c_str());
  EXPECT_NE(why, "");
}

}  // namespace
}  // namespace conveyor::testing_util
