// cuDNN's fused flash attention (the SDPA graphs of the cuDNN frontend) for CudaOps'
// causal attention over Megatron's fused QKV layout: bf16 in and out, fp32 softmax
// statistics, no dropout (cuDNN's RNG would not draw the CPU's Philox mask, so dropout
// stays with the built-in kernels).
//
// Q, K and V are strided views of qkv and their gradients are written into dqkv in place,
// with no copies, except for grouped-query attention with several groups: there a group's
// query heads sit together, so the heads of Q are not equally spaced and Q (and dQ) go
// through a packed copy (one cudaMemcpy2DAsync each way).
//
// `lse` is what the built-in kernels save too: fp32 [batch, heads, seq], the natural-log
// log-sum-exp of each scaled, causally masked score row (cuDNN's softmax "Stats"), so a
// forward by either path pairs with a backward by the other.
//
// Building a cuDNN graph takes milliseconds to seconds, so a graph is built once per shape
// and kept. A shape that cuDNN declines (validation, support check or plan build fails, or
// cuDNN itself cannot start) is reported once on stderr and declined from then on: the
// caller runs its own kernel. A failure to execute a built graph ends the process, like
// any failed CUDA call of the backend. Everything runs on the legacy default stream 0.
// Not thread-safe: one per CudaOps, which serves one thread.
//
// This header names no cuDNN type: only cudnn_attention.cc compiles the frontend's
// (large) headers.
#ifndef CONVEYOR_RUNTIME_CUDA_CUDNN_ATTENTION_H_
#define CONVEYOR_RUNTIME_CUDA_CUDNN_ATTENTION_H_

#include <memory>
#include <string>

#include "runtime/op_params.h"

namespace conveyor::cuda {

class CudnnAttention {
 public:
  CudnnAttention();  // cheap: cuDNN starts at the first call that needs it
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Enqueues attention forward and returns true, or returns false having enqueued nothing
  // when cuDNN declines. Device pointers: qkv bf16 [batch * seq, qkv_width]; ctx bf16
  // [batch * seq, context_width]; lse fp32 [batch, heads, seq].
  bool Forward(const AttentionShape& shape, const void* qkv, float scale, float* lse, void* ctx);

  // Enqueues attention backward (overwriting dqkv, qkv's layout) and returns true, or
  // returns false having enqueued nothing. lse from either path's forward.
  bool Backward(const AttentionShape& shape, const void* qkv, const float* lse, const void* ctx,
                const void* dctx, float scale, void* dqkv);

  // "cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9, built against 9.19.0), cuDNN
  // frontend 1.32.0": the library actually loaded, for logs (no device needed).
  static std::string Versions();

  // Describes the forward or backward graph of `shape` and checks it for a GPU of compute
  // capability sm_version (90: Hopper) without a device: the frontend's validation (dims,
  // strides, alignment, head_dim) and cuDNN's finalisation of the operation graph.
  // Returns "" or why not. Lets a machine without a GPU test the views; whether an engine
  // runs them is only known on a GPU.
  static std::string CheckWithoutDevice(const AttentionShape& shape, float scale, bool forward,
                                        int sm_version);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_CUDNN_ATTENTION_H_
