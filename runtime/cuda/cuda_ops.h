// The CUDA backend of the op interface (runtime/ops.h): activations in the compute dtype
// (bf16 for training; fp32 to compare tightly with the CPU backend), fp32 statistics,
// fp32 accumulated gradients, GEMMs through cuBLASLt, fused kernels for the rest.
//
// What is fused, and how:
//   Gemm            cuBLASLt, fp32 accumulation, cached plans (gemm_lt.h).
//   Linear*         the bias in the GEMM's epilogue: added to the product before its one
//                   rounding (a bf16 output takes a bf16 copy of the bias), GELU after
//                   it for the MLP's fc1 (the pre-activation kept as the epilogue's aux
//                   output), GELU's derivative in fc2's input gradient, and the bias
//                   gradient summed from the dy the weight-gradient GEMM reads; composed
//                   from Gemm and the other kernels where cuBLASLt declines.
//   Norm*           one kernel, one block per row: fp32 statistics, normalisation and
//                   affine (the row is re-read from cache, nothing else is written);
//                   backward-input likewise; dgamma and dbeta together in one
//                   deterministic column reduction.
//   Gelu / SwiGLU / squared ReLU   one elementwise kernel each way (SwiGLU reads gate and up
//                   together).
//   Dropout         the Philox mask is drawn inside the kernel (bit-identical to the
//                   CPU's), never stored; with the bias before and the residual add
//                   after in one pass where a sublayer rejoins the residual stream.
//   Attention       flash attention: the probabilities are never stored; `saved` is the
//                   fp32 log-sum-exp [batch, heads, seq]; backward recomputes P. In bf16
//                   without dropout, cuDNN's fused kernels (cudnn_attention.h) on strided
//                   views of qkv; otherwise, or for a shape cuDNN declines (reported once),
//                   the built-in kernels (attention_kernels.h: online softmax over key
//                   tiles, the CPU's dropout mask, head_dim and value heads <= 256).
//                   Both save the same log-sum-exp, so either backward follows either
//                   forward. Value heads may differ from the query/key heads' width
//                   (multi-latent attention) on both paths.
//   Cross-entropy   each pass reads the logits in their own dtype (no fp32 copy); the
//                   gradient is written over them in place.
//   Embedding       gather; the weight gradient is a deterministic segmented sum, in
//                   token order, with no atomics (rows grouped on the host from the host
//                   token ids).
//
// Conventions: every kernel runs on the legacy default stream 0. Host spans (token ids,
// labels, per-row numbers) go through reusable device staging buffers. A failed CUDA
// call, or a tensor of the wrong dtype, device or size, ends the process with a message
// naming the op (this backend's contract for now). Weights read by the elementwise and
// norm kernels (bias, gamma, beta, position and embedding tables) may be fp32 or the
// compute dtype. One CudaOps serves one thread (its staging buffers are not locked).
#ifndef CONVEYOR_RUNTIME_CUDA_CUDA_OPS_H_
#define CONVEYOR_RUNTIME_CUDA_CUDA_OPS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/gemm_lt.h"
#include "runtime/cuda/ring_attention_kernels.h"
#include "runtime/cuda/staging_buffer.h"
#include "runtime/ops.h"

namespace conveyor {

class CudaOps : public Ops {
 public:
  // Needs a usable device (ProbeGpus().count > 0; the caller picks it with cudaSetDevice)
  // and installs the device memory for Device::kCuda if that has not happened yet.
  // synchronize_each_op waits for the device after every op, so that an error in a
  // kernel is reported with the op's name instead of at some later call (tests,
  // debugging; it costs the overlap of host and device). cudnn_attention = false keeps
  // attention on the built-in kernels (tests compare the two paths).
  explicit CudaOps(DType compute_dtype, bool synchronize_each_op = false,
                   bool cudnn_attention = true);
  ~CudaOps() override;

  Device device() const override { return Device::kCuda; }
  DType compute_dtype() const override { return compute_dtype_; }

  void Cast(const Tensor& in, Tensor* out) const override;
  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const Tensor& a, const Tensor& b, float beta, Tensor* c) const override;
  void LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor* y) const override;
  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* pre,
                         Tensor* y) const override;
  void LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                               Tensor* dx) const override;
  void LinearWeightGrad(const Tensor& x, const Tensor& dy, Tensor* dw,
                        Tensor* dbias) const override;
  void AddBias(const Tensor& bias, Tensor* y) const override;
  void AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const override;
  void Add(const Tensor& x, Tensor* y) const override;
  void AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                       Tensor* x) const override;
  void AccumulatePositionGrad(const Tensor& dx, absl::Span<const int32_t> positions,
                              Tensor* dtable) const override;
  void NormForward(NormKind kind, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                   float eps, Tensor* y, Tensor* mean, Tensor* rstd) const override;
  void NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                         const Tensor& mean, const Tensor& rstd, Tensor* dx) const override;
  void NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                          Tensor* dgamma, Tensor* dbeta) const override;
  void GeluForward(const Tensor& x, Tensor* y) const override;
  void GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const override;
  void SwigluForward(const Tensor& x, Tensor* y) const override;
  void SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const override;
  void SquaredReluForward(const Tensor& x, Tensor* y) const override;
  void SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const override;
  void Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
               Tensor* out) const override;
  void BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p, uint64_t first_index,
                      const Tensor& residual, Tensor* y) const override;
  void CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                   int64_t dst_col) const override;
  void RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                            absl::Span<const int32_t> positions, bool inverse,
                            Tensor* qkv) const override;
  // saved: fp32 [batch, heads, seq], each query row's log-sum-exp.
  void AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                        const AttentionDropout& dropout, const AttentionMask& mask, Tensor* saved,
                        Tensor* ctx) const override;
  void AttentionBackward(const AttentionShape& shape, const Tensor& qkv, const Tensor& saved,
                         const Tensor& ctx, const Tensor& dctx, float scale,
                         const AttentionDropout& dropout, const AttentionMask& mask,
                         Tensor* dqkv) const override;
  void PackKeysValues(const AttentionShape& shape, const Tensor& qkv, Tensor* kv) const override;
  void AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv, Tensor* dqkv) const override;
  void AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                             const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                             float scale, const AttentionDropout& dropout, bool first, Tensor* ctx,
                             Tensor* lse) const override;
  void AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                              const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                              const Tensor& ctx, const Tensor& lse, const Tensor& dctx, float scale,
                              const AttentionDropout& dropout, Tensor* dqkv,
                              Tensor* dkv) const override;
  void EmbeddingForward(const Tensor& table, int64_t vocab_start, absl::Span<const int32_t> ids,
                        Tensor* out) const override;
  void EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                               absl::Span<const int32_t> ids, Tensor* dtable) const override;
  void RowMax(const Tensor& logits, absl::Span<double> row_max) const override;
  void SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels, int64_t vocab_start,
                       absl::Span<const double> row_max, absl::Span<double> sum_exp,
                       absl::Span<double> target) const override;
  void CrossEntropyBackward(absl::Span<const int32_t> labels, absl::Span<const float> logsumexp,
                            int64_t vocab_start, float scale, absl::Span<const float> loss_mask,
                            Tensor* logits) const override;

  // Heuristic queries cuBLASLt has run: grows only with new GEMM shapes (for tests).
  int64_t gemm_heuristic_queries() const { return gemm_->heuristic_queries(); }
  int64_t gemm_declined_epilogues() const { return gemm_->declined_epilogues(); }

  // How many attention calls each path has run (for tests: which path a shape took).
  struct AttentionPathCounts {
    int64_t cudnn_forward = 0;
    int64_t cudnn_backward = 0;
    int64_t builtin_forward = 0;
    int64_t builtin_backward = 0;
  };
  const AttentionPathCounts& attention_path_counts() const { return attention_paths_; }

  void PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                     absl::Span<const float> row_weight, Tensor* out) const override;
  void UnpermuteTokens(const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                       absl::Span<const float> slot_weight, Tensor* out) const override;
  void SlotDots(const Tensor& dy, const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                absl::Span<float> out) const override;
 private:
  // Ends the process naming `op` unless a, b and c fit c[m, n] = op(a) op(b) on this
  // device (a and b of one dtype, c fp32 or that dtype).
  void CheckGemm(const char* op, int64_t m, int64_t n, int64_t k, const Tensor& a, const Tensor& b,
                 const Tensor& c) const;
  // A linear layer's bias (`width` elements on this device) as a bias epilogue reads it:
  // in the output's `dtype` (a cast copy when it differs); only read.
  Tensor EpilogueBias(const char* op, const Tensor& bias, int64_t width, DType dtype) const;
  // Checks the launch and, with synchronize_each_op, waits for the op to finish.
  void Finish(const char* op) const;
  // The device copy of a RoPE table, uploaded again only when its contents change.
  const float* DeviceRopeTable(const RopeTable& table) const;
  // Device scratch for the row chunks' sums of a [rows, width] column sum.
  void* ColumnSumScratch(int64_t rows, int64_t width) const;
  // Whether attention over `qkv` may go to cuDNN (it may still decline the shape).
  bool MayUseCudnnAttention(const Tensor& qkv, const AttentionDropout& dropout,
                            const AttentionMask& mask) const;
  // A block op's positions and document starts on the device, with its geometry.
  cuda::AttentionBlockArgs DeviceBlockArgs(const char* op, const AttentionShape& shape,
                                           int64_t key_rows, const AttentionMask& mask,
                                           const AttentionDropout& dropout) const;
  // The mask's document starts on the device (null when it has none).
  const int32_t* DeviceDocumentStarts(const char* op, const AttentionShape& shape,
                                      const AttentionMask& mask) const;

  DType compute_dtype_;
  bool synchronize_each_op_;
  std::unique_ptr<cuda::GemmLt> gemm_;
  std::unique_ptr<cuda::CudnnAttention> cudnn_attention_;  // null: built-in kernels only
  mutable AttentionPathCounts attention_paths_;
  mutable cuda::StagingBuffer ints_;         // token ids, labels, positions, gradient plans
  mutable cuda::StagingBuffer floats_;       // row maxima, log-sum-exps (and loss masks)
  mutable cuda::StagingBuffer doubles_;      // sum_exp and target, for download
  mutable cuda::StagingBuffer rope_;         // [cos | sin]
  mutable cuda::StagingBuffer document_starts_;  // attention's document mask
  mutable cuda::StagingBuffer query_positions_;  // a ring attention block's positions
  mutable cuda::StagingBuffer key_positions_;
  mutable cuda::StagingBuffer column_sums_;  // the row chunks' sums of a column sum
  mutable std::vector<float> rope_host_;     // what rope_ holds
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_CUDA_OPS_H_
