#include "runtime/cuda/cudnn_attention.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/staging_buffer.h"

namespace conveyor::cuda {
namespace {

namespace fe = cudnn_frontend;

using Dims = std::vector<int64_t>;

constexpr int64_t kBytes = 2;  // bf16
// The SDPA kernels move every bf16 operand with 16-byte vector loads and TMA, and cuDNN
// does not check the pointers: a misaligned one gives wrong results on Hopper (the
// frontend's execute() refuses it, which here would end the process, so it is checked
// first and declined).
constexpr uintptr_t kAlignment = 16;
constexpr int64_t kScratchAlignment = 256;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// The operands as cuDNN's 4-D [batch, heads, seq, dim] views, strides in elements. With
// W = qkv_width, P = heads_per_group, d = head_dim, dv = value_dim (dv != d under
// multi-latent attention, which cuDNN's SDPA takes: V and O have their own head dim) and
// G = (P + 1) d + dv a group's width, query head h = g P + j of token t sits at
// t W + g G + j d, its group's key P d further on and the value d after that:
//   K      [b, groups, s, d]   strides [s W, G, W, 1] from qkv + P d
//   V      [b, groups, s, dv]  strides [s W, G, W, 1] from qkv + (P + 1) d
//   Q      [b, heads, s, d]    strides [s W, G, W, 1] for P = 1 (multi-head),
//                                      [s W, d, W, 1] for one group (multi-query);
//          otherwise the packed copy [b s, heads d], strides [s heads d, d, heads d, 1]
//   O, dO  ctx [b s, heads dv]: strides [s heads dv, dv, heads dv, 1]
//   Stats  lse [b, heads, s] as [b, heads, s, 1]: strides [heads s, s, 1, 1], fp32
// Each gradient has its operand's view (dQ, dK, dV inside dqkv).
struct Views {
  bool packed_q;
  Dims q_dim, q_stride, k_dim, v_dim, kv_stride, o_dim, o_stride, stats_dim, stats_stride;
  int64_t k_offset, v_offset;  // elements from the start of a qkv row
  int64_t packed_q_bytes;      // the size of the copy of Q (or dQ) when packed_q, else 0
};

Views ViewsOf(const AttentionShape& s) {
  const int64_t b = s.batch, n = s.seq, d = s.head_dim, g = s.groups, p = s.heads_per_group;
  const int64_t h = s.heads(), w = s.qkv_width(), dv = s.value_dim(), gw = s.group_width();
  Views v;
  v.packed_q = g > 1 && p > 1;
  v.q_dim = {b, h, n, d};
  v.q_stride = v.packed_q ? Dims{n * h * d, d, h * d, 1} : Dims{n * w, p == 1 ? gw : d, w, 1};
  v.k_dim = {b, g, n, d};
  v.v_dim = {b, g, n, dv};
  v.kv_stride = {n * w, gw, w, 1};
  v.o_dim = {b, h, n, dv};
  v.o_stride = {n * h * dv, dv, h * dv, 1};
  v.stats_dim = {b, h, n, 1};
  v.stats_stride = {h * n, n, 1, 1};
  v.k_offset = p * d;
  v.v_offset = (p + 1) * d;
  v.packed_q_bytes = v.packed_q ? b * n * h * d * kBytes : 0;
  return v;
}

// The query heads of one (token, group) are P d contiguous elements, every group_width in
// qkv and every P d in the packed copy: one 2-D copy of batch * seq * groups rows.
void PackQueries(const AttentionShape& s, const void* qkv, void* packed) {
  const size_t row = s.heads_per_group * s.head_dim * kBytes;
  const size_t group = s.group_width() * kBytes;
  CUDA_CHECK(cudaMemcpy2DAsync(packed, row, qkv, group, row, s.batch * s.seq * s.groups,
                               cudaMemcpyDeviceToDevice, 0));
}

void UnpackQueryGrads(const AttentionShape& s, const void* packed, void* dqkv) {
  const size_t row = s.heads_per_group * s.head_dim * kBytes;
  const size_t group = s.group_width() * kBytes;
  CUDA_CHECK(cudaMemcpy2DAsync(dqkv, group, packed, row, row, s.batch * s.seq * s.groups,
                               cudaMemcpyDeviceToDevice, 0));
}

const char* At(const void* base, int64_t elements) {
  return static_cast<const char*>(base) + elements * kBytes;
}
char* At(void* base, int64_t elements) { return static_cast<char*>(base) + elements * kBytes; }

int64_t RoundUp(int64_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

std::string ShapeName(bool forward, const AttentionShape& s) {
  return absl::StrCat(forward ? "forward" : "backward", " batch=", s.batch, " seq=", s.seq,
                      " heads=", s.heads(), " kv_heads=", s.groups, " head_dim=", s.head_dim,
                      " v_head_dim=", s.value_dim());
}

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

TensorPtr Operand(fe::graph::Graph& graph, const char* name, Uid uid, const Dims& dim,
                  const Dims& stride) {
  return graph.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
}

void SetOutput(const TensorPtr& t, Uid uid, const Dims& dim, const Dims& stride) {
  t->set_output(true).set_uid(uid).set_dim(dim).set_stride(stride);
}

// bf16 tensors; the scores, softmax and accumulation in fp32. sm_version 0 leaves the
// target GPU to be read from the device; a set one lets a graph be validated without one.
std::shared_ptr<fe::graph::Graph> NewGraph(int sm_version) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (sm_version > 0) graph->set_sm_version(sm_version);  // before the nodes copy the context
  return graph;
}

// O = softmax(scale Q K^T, causal: key j <= query i) V, and Stats = the rows' log-sum-exp.
// set_causal_mask is the top-left diagonal (j <= i), the CPU reference's mask for
// s_q = s_kv. Stats is max + ln(sum exp) of the scaled scores in fp32 (the frontend's
// Softmax node; stats_use_log2 would make it base 2 and stays off).
std::shared_ptr<fe::graph::Graph> ForwardGraph(const Views& v, float scale, int sm_version) {
  auto graph = NewGraph(sm_version);
  const TensorPtr q = Operand(*graph, "Q", kQ, v.q_dim, v.q_stride);
  const TensorPtr k = Operand(*graph, "K", kK, v.k_dim, v.kv_stride);
  const TensorPtr val = Operand(*graph, "V", kV, v.v_dim, v.kv_stride);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention")
                     .set_generate_stats(true)
                     .set_causal_mask(true)
                     .set_attn_scale(scale);
  auto [o, stats] = graph->sdpa(q, k, val, options);
  if (o == nullptr || stats == nullptr) return nullptr;
  SetOutput(o, kO, v.o_dim, v.o_stride);
  SetOutput(stats, kStats, v.stats_dim, v.stats_stride);
  stats->set_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// dQ, dK, dV from Q, K, V, O, dO and Stats (P is recomputed as exp(scale Q K^T - Stats)).
// The deterministic algorithm: the default one accumulates dQ with atomics, so its last
// bits would differ from run to run and a resumed run would not repeat the uninterrupted
// one. Its price on Hopper is a bf16 [b, h, s, s] dP workspace: a gigabyte for the 1.3B
// model's micro-batch, which an H200 has to spare.
std::shared_ptr<fe::graph::Graph> BackwardGraph(const Views& v, float scale, int sm_version) {
  auto graph = NewGraph(sm_version);
  const TensorPtr q = Operand(*graph, "Q", kQ, v.q_dim, v.q_stride);
  const TensorPtr k = Operand(*graph, "K", kK, v.k_dim, v.kv_stride);
  const TensorPtr val = Operand(*graph, "V", kV, v.v_dim, v.kv_stride);
  const TensorPtr o = Operand(*graph, "O", kO, v.o_dim, v.o_stride);
  const TensorPtr d_o = Operand(*graph, "dO", kDO, v.o_dim, v.o_stride);
  const TensorPtr stats = Operand(*graph, "Stats", kStats, v.stats_dim, v.stats_stride);
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(scale)
                     .set_deterministic_algorithm(true);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, val, o, d_o, stats, options);
  if (dq == nullptr || dk == nullptr || dv == nullptr) return nullptr;
  SetOutput(dq, kDQ, v.q_dim, v.q_stride);
  SetOutput(dk, kDK, v.k_dim, v.kv_stride);
  SetOutput(dv, kDV, v.v_dim, v.kv_stride);
  return graph;
}

}  // namespace

struct CudnnAttention::Impl {
  struct Plan {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace_bytes = 0;
  };
  // (forward, batch, seq, groups, heads_per_group, head_dim, value_dim, bits of scale)
  using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t>;

  ~Impl() {
    plans.clear();  // the graphs' plans before the handle they were built on
    if (handle != nullptr) cudnnDestroy(handle);  // best effort: may run at exit
  }

  // The handle, created at the first use; null (reported once) when cuDNN cannot start.
  cudnnHandle_t Handle() {
    if (handle != nullptr || unusable) return handle;
    cudnnStatus_t status = cudnnCreate(&handle);
    if (status == CUDNN_STATUS_SUCCESS) status = cudnnSetStream(handle, /*legacy default*/ 0);
    if (status != CUDNN_STATUS_SUCCESS) {
      std::fprintf(stderr,
                   "conveyor: cuDNN attention unavailable: cuDNN did not start (%s; %s); using "
                   "the built-in kernel\n",
                   cudnnGetErrorString(status), Versions().c_str());
      std::fflush(stderr);
      if (handle != nullptr) cudnnDestroy(handle);
      handle = nullptr;
      unusable = true;
      cudaGetLastError();  // as in PlanFor: not to be blamed on the next kernel
    }
    return handle;
  }

  // The built graph for this shape, or null when cuDNN declines it (reported once).
  const Plan* PlanFor(bool forward, const AttentionShape& s, const Views& views, float scale) {
    if (Handle() == nullptr) return nullptr;
    uint32_t scale_bits;
    std::memcpy(&scale_bits, &scale, sizeof(scale_bits));
    const Key key{forward,           s.batch,    s.seq,         s.groups,
                  s.heads_per_group, s.head_dim, s.value_dim(), scale_bits};
    if (auto it = plans.find(key); it != plans.end()) return it->second.get();
    std::unique_ptr<Plan>& slot = plans[key];
    const std::string why = Build(forward, views, scale, handle, &slot);
    // A CUDA call that failed while cuDNN probed the device must not be blamed on the next
    // kernel (CudaOps checks cudaGetLastError after each op).
    cudaGetLastError();
    if (!why.empty()) {
      slot.reset();
      std::fprintf(stderr,
                   "conveyor: cuDNN attention unavailable for %s: %s; using the built-in kernel\n",
                   ShapeName(forward, s).c_str(), why.c_str());
      std::fflush(stderr);
    }
    return slot.get();
  }

  // Builds into *plan; returns why not, or "" on success.
  static std::string Build(bool forward, const Views& views, float scale, cudnnHandle_t handle,
                           std::unique_ptr<Plan>* plan) {
    try {
      auto graph = forward ? ForwardGraph(views, scale, /*sm_version=*/0)
                           : BackwardGraph(views, scale, /*sm_version=*/0);
      if (graph == nullptr) return "the SDPA node gave no outputs";
      if (fe::error_t e = graph->build(handle, {fe::HeurMode_t::A}); !e.is_good()) {
        return absl::StrCat(e.get_message(), " (", Versions(), ")");
      }
      int64_t workspace = 0;
      if (fe::error_t e = graph->get_workspace_size(workspace); !e.is_good()) {
        return e.get_message();
      }
      *plan = std::make_unique<Plan>(Plan{std::move(graph), workspace});
      return "";
    } catch (const std::exception& e) {  // the frontend's legacy parts throw
      return absl::StrCat("exception: ", e.what());
    }
  }

  // Enqueues the plan; a failure here is not a shape cuDNN declined but a broken run.
  void Execute(bool forward, const AttentionShape& s, const Plan& plan,
               std::unordered_map<int64_t, void*>& pack, void* workspace) {
    fe::error_t e = plan.graph->execute(handle, pack, workspace);
    if (!e.is_good()) {
      const std::string message = absl::StrCat("cuDNN attention failed to execute for ",
                                               ShapeName(forward, s), ": ", e.get_message());
      Fatal(forward ? "AttentionForward" : "AttentionBackward", message.c_str());
    }
  }

  // Whether every operand is aligned for the SDPA kernels (the first time not, reported).
  bool Aligned(std::initializer_list<const void*> pointers) {
    for (const void* p : pointers) {
      if (reinterpret_cast<uintptr_t>(p) % kAlignment == 0) continue;
      if (!reported_misaligned) {
        std::fprintf(stderr,
                     "conveyor: cuDNN attention unavailable for an operand not %d-byte aligned; "
                     "using the built-in kernel\n",
                     static_cast<int>(kAlignment));
        std::fflush(stderr);
        reported_misaligned = true;
      }
      return false;
    }
    return true;
  }

  // One grow-only device buffer: the graph's workspace, then the packed Q and dQ copies.
  // Null (reported once) when the device has no room even after the caching allocator
  // returned its unused blocks: the deterministic backward's workspace grows as seq^2, and
  // the built-in kernel needs none.
  void* Scratch(int64_t bytes) {
    if (void* p = scratch.TryReserve(bytes)) return p;
    EmptyDeviceCache();
    if (void* p = scratch.TryReserve(bytes)) return p;
    if (!reported_no_room) {
      std::fprintf(stderr,
                   "conveyor: cuDNN attention unavailable: no room for its %lld-byte workspace; "
                   "using the built-in kernel\n",
                   static_cast<long long>(bytes));
      std::fflush(stderr);
      reported_no_room = true;
    }
    return nullptr;
  }

  cudnnHandle_t handle = nullptr;
  bool unusable = false;
  bool reported_misaligned = false;
  bool reported_no_room = false;
  std::map<Key, std::unique_ptr<Plan>> plans;  // null: declined
  StagingBuffer scratch;
};

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {}

CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::Versions() {
  const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  // Which libcudnn the loader picked: on a GPU machine it may come from a Python wheel.
  Dl_info where{};
  const bool found =
      dladdr(reinterpret_cast<void*>(&cudnnGetVersion), &where) != 0 && where.dli_fname != nullptr;
  return absl::StrCat("cuDNN ", v / 10000, ".", v / 100 % 100, ".", v % 100, " (",
                      found ? where.dli_fname : "unknown file", ", built against ", CUDNN_MAJOR,
                      ".", CUDNN_MINOR, ".", CUDNN_PATCHLEVEL, "), cuDNN frontend ",
                      CUDNN_FRONTEND_MAJOR_VERSION, ".", CUDNN_FRONTEND_MINOR_VERSION, ".",
                      CUDNN_FRONTEND_PATCH_VERSION);
}

std::string CudnnAttention::CheckWithoutDevice(const AttentionShape& shape, float scale,
                                               bool forward, int sm_version) {
  try {
    const Views views = ViewsOf(shape);
    auto graph =
        forward ? ForwardGraph(views, scale, sm_version) : BackwardGraph(views, scale, sm_version);
    if (graph == nullptr) return "the SDPA node gave no outputs";
    if (fe::error_t e = graph->validate(); !e.is_good()) return e.get_message();
    if (fe::error_t e = graph->build_operation_graph(nullptr); !e.is_good()) {
      return e.get_message();
    }
    return "";
  } catch (const std::exception& e) {
    return absl::StrCat("exception: ", e.what());
  }
}

bool CudnnAttention::Forward(const AttentionShape& shape, const void* qkv, float scale, float* lse,
                             void* ctx) {
  const Views v = ViewsOf(shape);
  const void* k = At(qkv, v.k_offset);
  const void* val = At(qkv, v.v_offset);
  if (!impl_->Aligned({qkv, k, val, ctx})) return false;
  const Impl::Plan* plan = impl_->PlanFor(/*forward=*/true, shape, v, scale);
  if (plan == nullptr) return false;
  const int64_t q_at = RoundUp(plan->workspace_bytes);
  char* scratch = static_cast<char*>(impl_->Scratch(q_at + v.packed_q_bytes));
  if (scratch == nullptr) return false;
  const void* q = qkv;
  if (v.packed_q) {
    PackQueries(shape, qkv, scratch + q_at);
    q = scratch + q_at;
  }
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(q)},
      {kK, const_cast<void*>(k)},
      {kV, const_cast<void*>(val)},
      {kO, ctx},
      {kStats, lse},
  };
  impl_->Execute(/*forward=*/true, shape, *plan, pack, scratch);
  return true;
}

bool CudnnAttention::Backward(const AttentionShape& shape, const void* qkv, const float* lse,
                              const void* ctx, const void* dctx, float scale, void* dqkv) {
  const Views v = ViewsOf(shape);
  const void* k = At(qkv, v.k_offset);
  const void* val = At(qkv, v.v_offset);
  void* dk = At(dqkv, v.k_offset);
  void* dv = At(dqkv, v.v_offset);
  if (!impl_->Aligned({qkv, k, val, ctx, dctx, dqkv, dk, dv})) return false;
  const Impl::Plan* plan = impl_->PlanFor(/*forward=*/false, shape, v, scale);
  if (plan == nullptr) return false;
  const int64_t q_at = RoundUp(plan->workspace_bytes);
  const int64_t dq_at = q_at + RoundUp(v.packed_q_bytes);
  char* scratch = static_cast<char*>(impl_->Scratch(dq_at + v.packed_q_bytes));
  if (scratch == nullptr) return false;
  const void* q = qkv;
  void* dq = dqkv;
  if (v.packed_q) {
    PackQueries(shape, qkv, scratch + q_at);
    q = scratch + q_at;
    dq = scratch + dq_at;
  }
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(q)},
      {kK, const_cast<void*>(k)},
      {kV, const_cast<void*>(val)},
      {kO, const_cast<void*>(ctx)},
      {kDO, const_cast<void*>(dctx)},
      {kStats, const_cast<float*>(lse)},
      {kDQ, dq},
      {kDK, dk},
      {kDV, dv},
  };
  impl_->Execute(/*forward=*/false, shape, *plan, pack, scratch);
  if (v.packed_q) UnpackQueryGrads(shape, dq, dqkv);
  return true;
}

}  // namespace conveyor::cuda
