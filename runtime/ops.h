// The op interface the model computes through, one implementation per backend:
// runtime/cpu/cpu_ops.h (fp32, OpenBLAS: the reference every other backend is tested
// against) and runtime/cuda/cuda_ops.h (bf16 activations, fp32 accumulation).
//
// Tensors passed to an Ops live on its device(). Activations, and the compute copies of
// weights the GEMMs read, have its compute_dtype(); what accumulates across
// micro-batches (weight and bias gradients) and per-row statistics stay fp32, and so do
// the parameters the other ops read (norm gamma and beta, biases, embedding and
// position tables: their fp32 master values). Outputs
// are allocated by the caller unless a comment says otherwise. Token ids, labels and the
// per-row numbers of the vocabulary-parallel cross-entropy (reduced across tensor-parallel
// ranks by the model) are host arrays on every backend.
#ifndef CONVEYOR_RUNTIME_OPS_H_
#define CONVEYOR_RUNTIME_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "runtime/attention_mask.h"
#include "runtime/device_memory.h"
#include "runtime/dtype.h"
#include "runtime/op_params.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace conveyor {

class Ops {
 public:
  virtual ~Ops() = default;

  virtual Device device() const = 0;
  virtual DType compute_dtype() const = 0;

  // A tensor of the compute type on this device, counted as activations, for an op to
  // write whole: its contents are undefined until then (Tensor::Uninitialized), which on
  // a GPU saves a pass over memory per activation.
  Tensor NewActivation(std::vector<int64_t> shape) const {
    return Tensor::Uninitialized(std::move(shape), MemoryCategory::kActivations, compute_dtype(),
                                 device());
  }
  // The same in fp32 (norm statistics, attention's row statistics).
  Tensor NewFloatActivation(std::vector<int64_t> shape) const {
    return Tensor::Uninitialized(std::move(shape), MemoryCategory::kActivations, DType::kFloat32,
                                 device());
  }

  // Converts between element types (fp32 <-> compute type) with round-to-nearest-even;
  // `out` has in's shape.
  virtual void Cast(const Tensor& in, Tensor* out) const = 0;
  // `t` itself when it already has `dtype`, else a copy cast to it on t's device, counted
  // in t's category.
  Tensor CastTo(const Tensor& t, DType dtype) const {
    if (t.dtype() == dtype) return t;
    Tensor cast = Tensor::Uninitialized(t.shape(), t.category(), dtype, t.device());
    Cast(t, &cast);
    return cast;
  }

  // c = alpha * op(a) * op(b) + beta * c over row-major matrices: op(a) is [m, k], op(b)
  // is [k, n], c is [m, n]; trans_a / trans_b say that a / b are stored transposed. a and
  // b have the compute type; c has the compute type or fp32 (weight gradients accumulate
  // in fp32, beta = 1).
  virtual void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const Tensor& a, const Tensor& b, float beta, Tensor* c) const = 0;

  // A linear layer's forward, y = x w^T (+ bias, fp32 [out], when not null): x [rows,
  // in], w [out, in] and y [rows, out] of the compute type. Backends may fold the bias
  // into the GEMM; this composition is the reference.
  virtual void LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                             Tensor* y) const {
    Gemm(false, true, x.dim(0), w.dim(0), w.dim(1), 1.0f, x, w, 0.0f, y);
    if (bias != nullptr) AddBias(*bias, y);
  }
  // A linear layer followed by GELU (the MLP's fc1): pre = x w^T (+ bias), y = GELU(pre),
  // both [rows, out] of the compute type (pre is what GELU's backward reads). Backends
  // may compute both in the GEMM's epilogue; this composition is the reference.
  virtual void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* pre,
                                 Tensor* y) const {
    LinearForward(x, w, bias, pre);
    GeluForward(*pre, y);
  }
  // A linear layer's input gradient through the GELU before it (the MLP's fc2 back to
  // fc1's output): dx = GELU'(pre) * (dy w), dy [rows, out], w [out, in], pre and dx
  // [rows, in]. Backends may apply GELU's derivative in the GEMM's epilogue; this
  // composition is the reference.
  virtual void LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                                       Tensor* dx) const {
    Tensor d_act = NewActivation(dx->shape());
    Gemm(false, false, dy.dim(0), w.dim(1), w.dim(0), 1.0f, dy, w, 0.0f, &d_act);
    GeluBackward(pre, d_act, dx);
  }
  // A linear layer's weight gradients: dw (fp32 [out, in]) += dy^T x and, when dbias
  // (fp32 [out]) is not null, dbias += the sums of dy's rows. Backends may take the bias
  // gradient from the GEMM's read of dy; this composition is the reference.
  virtual void LinearWeightGrad(const Tensor& x, const Tensor& dy, Tensor* dw,
                                Tensor* dbias) const {
    Gemm(true, false, dw->dim(0), dw->dim(1), dy.dim(0), 1.0f, dy, x, 1.0f, dw);
    if (dbias != nullptr) AccumulateBiasGrad(dy, dbias);
  }

  // y[r, :] += bias for each row r of y ([rows, bias.numel()]).
  virtual void AddBias(const Tensor& bias, Tensor* y) const = 0;
  // dbias (fp32) += the sum over rows of dy.
  virtual void AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const = 0;
  // y += x, elementwise.
  virtual void Add(const Tensor& x, Tensor* y) const = 0;

  // Learned positions: x[r, :] += table[positions[r], :], and the gradient
  // dtable[positions[r], :] += dx[r, :] (dtable fp32), rows added in increasing r.
  // positions: one per row of x / dx (host), each below the table's rows.
  virtual void AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                               Tensor* x) const = 0;
  virtual void AccumulatePositionGrad(const Tensor& dx, absl::Span<const int32_t> positions,
                                      Tensor* dtable) const = 0;

  // LayerNorm / RMSNorm over rows of width gamma.numel() (see cpu/norm.h for the math).
  // mean and rstd are fp32 [rows]; beta and dbeta are null for RMSNorm. Backward is split
  // into dx now and the fp32 weight gradients (accumulated) later.
  virtual void NormForward(NormKind kind, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                           float eps, Tensor* y, Tensor* mean, Tensor* rstd) const = 0;
  virtual void NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x,
                                 const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                 Tensor* dx) const = 0;
  virtual void NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                  const Tensor& rstd, Tensor* dgamma, Tensor* dbeta) const = 0;

  // GELU (tanh form) elementwise; SwiGLU on x = [rows, 2 * width] (gate | up) giving
  // y = [rows, width]. Backward gives dx of x's shape.
  virtual void GeluForward(const Tensor& x, Tensor* y) const = 0;
  virtual void GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const = 0;
  virtual void SwigluForward(const Tensor& x, Tensor* y) const = 0;
  virtual void SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const = 0;
  // Squared ReLU (--squared-relu) elementwise: y = max(x, 0)^2, dx = 2 max(x, 0) dy.
  virtual void SquaredReluForward(const Tensor& x, Tensor* y) const = 0;
  virtual void SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const = 0;

  // out = in * keep / (1 - p), keep[i] = rng.Uniform(first_index + i) >= p; the same call
  // maps dy to dx. in and out may be the same tensor.
  virtual void Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
                       Tensor* out) const = 0;
  // Megatron's bias-dropout-add, where a sublayer's output rejoins the residual stream:
  // y = residual + Dropout(y + bias) (bias fp32 [width] or null, the mask Dropout's).
  // Backends may do it in one pass; this composition is the reference.
  virtual void BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p,
                              uint64_t first_index, const Tensor& residual, Tensor* y) const {
    if (bias != nullptr) AddBias(*bias, y);
    Dropout(rng, p, first_index, *y, y);
    Add(residual, y);
  }

  // Copies `width` columns between row-major matrices of one element type with the same
  // rows: dst[r, dst_col + j] = src[r, src_col + j] for j < width, each tensor a matrix
  // of its last dimension's width. Moves query and key heads out of the fused qkv and
  // back (--qk-layernorm); a bare copy, so no rounding.
  virtual void CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                           int64_t dst_col) const = 0;

  // Rotates the query and key heads of every token of qkv ([rows, qkv_width], row r at
  // position positions[r], a host array of one position per row, each below the
  // table's) by RoPE; inverse rotates back (for gradients).
  virtual void RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                                    absl::Span<const int32_t> positions, bool inverse,
                                    Tensor* qkv) const = 0;

  // Causal grouped-query attention over the whole sample held here (see cpu/attention.h
  // for the math; `mask` with empty positions: document masking at most). Forward
  // allocates `saved`, what backward needs besides qkv and ctx (each row's fp32
  // log-sum-exp, [batch, heads, seq]), and writes ctx [batch * seq, context_width()].
  // Backward overwrites dqkv [batch * seq, qkv_width].
  virtual void AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                                const AttentionDropout& dropout, const AttentionMask& mask,
                                Tensor* saved, Tensor* ctx) const = 0;
  virtual void AttentionBackward(const AttentionShape& shape, const Tensor& qkv,
                                 const Tensor& saved, const Tensor& ctx, const Tensor& dctx,
                                 float scale, const AttentionDropout& dropout,
                                 const AttentionMask& mask, Tensor* dqkv) const = 0;

  // Ring attention (context parallelism): the keys arrive in blocks from other ranks.
  // PackKeysValues writes kv [batch * seq, kv_width()] (compute type) from
  // qkv's key and value heads; AddKeyValueGrad adds such a block's gradient (fp32) back
  // into dqkv's.
  virtual void PackKeysValues(const AttentionShape& shape, const Tensor& qkv,
                              Tensor* kv) const = 0;
  virtual void AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv,
                               Tensor* dqkv) const = 0;
  // qkv's queries against a block kv of `key_rows` keys per sample (mask positions by
  // global position), merged into the running ctx (fp32 [batch * seq, context_width()]:
  // the blocks' sum is not rounded between them) and lse (fp32 [batch, heads, seq]);
  // `first` overwrites them. Backward, from the final ctx (compute type) and lse:
  // dqkv's query heads += dQ (its key and value heads untouched), dkv (fp32) += (dK, dV).
  virtual void AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                                     const AttentionMask& mask, const Tensor& qkv,
                                     const Tensor& kv, float scale,
                                     const AttentionDropout& dropout, bool first, Tensor* ctx,
                                     Tensor* lse) const = 0;
  virtual void AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                                      const AttentionMask& mask, const Tensor& qkv,
                                      const Tensor& kv, const Tensor& ctx, const Tensor& lse,
                                      const Tensor& dctx, float scale,
                                      const AttentionDropout& dropout, Tensor* dqkv,
                                      Tensor* dkv) const = 0;

  // Vocabulary-parallel embedding: this rank holds table rows [vocab_start, vocab_start +
  // table rows). out[t] = table[ids[t] - vocab_start] for ids in range, else 0; the weight
  // gradient accumulates dout's rows into dtable (fp32).
  virtual void EmbeddingForward(const Tensor& table, int64_t vocab_start,
                                absl::Span<const int32_t> ids, Tensor* out) const = 0;
  virtual void EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                                       absl::Span<const int32_t> ids, Tensor* dtable) const = 0;

  // Vocabulary-parallel cross-entropy over logits [rows, local vocab] (cpu/cross_entropy.h):
  // the row maxima, then sum_exp[t] = sum_v exp(z[t, v] - row_max[t]) and the target
  // logit (0 when the label is not in this rank's range), then the gradient written over
  // the logits: scale * mask[t] * (softmax - onehot), mask the host loss mask (empty:
  // every row counts).
  virtual void RowMax(const Tensor& logits, absl::Span<double> row_max) const = 0;
  virtual void SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                               int64_t vocab_start, absl::Span<const double> row_max,
                               absl::Span<double> sum_exp, absl::Span<double> target) const = 0;
  // RowMax then SumExpAndTarget, as one op: backends may read the logits once (an online
  // max and sum, cpu/cross_entropy.h); this composition is the reference. row_max is this
  // rank's own max, and sum_exp is relative to it.
  virtual void RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                     int64_t vocab_start, absl::Span<double> row_max,
                                     absl::Span<double> sum_exp, absl::Span<double> target) const {
    RowMax(logits, row_max);
    SumExpAndTarget(logits, labels, vocab_start, row_max, sum_exp, target);
  }
  virtual void CrossEntropyBackward(absl::Span<const int32_t> labels,
                                    absl::Span<const float> logsumexp, int64_t vocab_start,
                                    float scale, absl::Span<const float> loss_mask,
                                    Tensor* logits) const = 0;

  // Mixture of experts, one rank (see cpu/moe_tokens.h for the math): tokens [tokens,
  // width] permuted into expert order (out [rows, width]; token_of_row -1 gives a zero
  // padding row; row_weight empty means 1), combined back per token with the slots'
  // weights (out [tokens, width], written; row_of_slot [tokens * topk], -1 for a dropped
  // slot; slot_weight empty means 1), and the dot products of each token's output
  // gradient with its slots' rows (the routing weights' gradient, a host array). Index
  // and weight arrays are host arrays on every backend.
  virtual void PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                             absl::Span<const float> row_weight, Tensor* out) const = 0;
  virtual void UnpermuteTokens(const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                               absl::Span<const float> slot_weight, Tensor* out) const = 0;
  virtual void SlotDots(const Tensor& dy, const Tensor& permuted,
                        absl::Span<const int32_t> row_of_slot, absl::Span<float> out) const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_OPS_H_
