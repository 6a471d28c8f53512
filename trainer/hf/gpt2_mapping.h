// Conveyor's GPT parameters <-> Hugging Face's GPT2LMHeadModel weights.
//
// The two models compute the same function when Conveyor runs GPT-2's architecture
// (learned positions, LayerNorm, tanh GELU, tied embeddings, biases, multi-head
// attention, ffn = 4h); only the storage differs:
//   - HF's Conv1D layers (c_attn, c_proj, c_fc) store weights [in, out]; Conveyor's
//     linears store [out, in] as Megatron does, so those weights are transposed;
//   - Conveyor's qkv rows are grouped per head, [q_0 k_0 v_0 q_1 k_1 v_1 ...] (d rows
//     each; Megatron's layout, which keeps a head's rows on one tensor-parallel
//     rank), while HF's c_attn output columns are [q_0 .. q_n | k_0 .. k_n | v_0 .. v_n];
//   - Conveyor's vocabulary is padded (PaddedVocabSize); HF's has the real size, so
//     the padding rows are dropped on export and zero-filled on import;
//   - HF's position table may be longer than Conveyor's max_position_embeddings; only
//     the rows Conveyor uses are imported.
#ifndef CONVEYOR_TRAINER_HF_GPT2_MAPPING_H_
#define CONVEYOR_TRAINER_HF_GPT2_MAPPING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {

// Whole global tensors by Conveyor parameter name, row-major in the single-rank
// model's shape (see GptParameterShapes).
using GlobalTensorMap = std::map<std::string, std::vector<float>>;

// Reading a folder by element range, for a rank that keeps slices (mapped_weights.h):
// elements [begin, begin + count) (row-major) of the HF tensor `name` into `out`, and
// an HF tensor's shape (null when the folder has no such tensor).
using HfRangeReader =
    std::function<absl::Status(const std::string& name, int64_t begin, int64_t count, float* out)>;
using HfShapeOf = std::function<const std::vector<int64_t>*(const std::string& name)>;

// OK when `config` describes a model GPT-2's architecture can hold; otherwise
// FailedPrecondition listing every mismatch, one per line, each with the flag to
// change. Zero "auto" sizes are read as the config resolver fills them in.
absl::Status CheckGpt2Architecture(const Config& config);

// The sizes the mapping needs, from a config that passes CheckGpt2Architecture.
struct Gpt2Dims {
  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t vocab = 0;         // config.model.vocab_size: HF's vocab_size
  int64_t padded_vocab = 0;  // rows of Conveyor's word embedding
  int64_t positions = 0;     // max_position_embeddings (seq_length when 0)
  int64_t head_dim() const { return hidden / heads; }
  int64_t ffn() const { return 4 * hidden; }
};
// `padded_vocab`: the rows of the word embedding (PaddedVocabSize for the run's
// tensor-parallel size, or the shape a checkpoint stores).
absl::StatusOr<Gpt2Dims> Gpt2DimsFromConfig(const Config& config, int64_t padded_vocab);

// Conveyor's parameter names and global shapes for `dims` (tied embeddings, so no
// output_layer.weight).
std::map<std::string, std::vector<int64_t>> GptParameterShapes(const Gpt2Dims& dims);

// Conveyor -> HF names and layouts ("transformer.wte.weight", ...; lm_head is tied
// and left out, as transformers' own saves do). InvalidArgument naming the tensor when
// one is missing or has the wrong number of elements.
absl::StatusOr<HfTensorMap> ConveyorToHfGpt2(const GlobalTensorMap& tensors, const Gpt2Dims& dims);

// HF -> Conveyor. Accepts names with or without the "transformer." prefix (files
// saved from GPT2Model have none); ignores the attention-mask buffers (attn.bias,
// attn.masked_bias) and lm_head.weight (tied to wte). InvalidArgument naming the
// tensor for a missing, unexpected or wrongly shaped tensor, or a position table
// shorter than dims.positions.
absl::StatusOr<GlobalTensorMap> HfToConveyorGpt2(const HfTensorMap& tensors, const Gpt2Dims& dims);

// HF -> Conveyor for only the elements a rank keeps: `wanted` maps Conveyor tensors to
// the global flat indices of their local elements (in local order); each element is
// read through `read` from where HF stores it (transposed Conv1D weights and regrouped
// c_attn columns come one element per read, so only the rank's bytes are touched).
// Names with or without "transformer." (`shape_of` is asked for both); padding rows
// are 0. InvalidArgument naming the tensor for a missing or wrongly shaped one, or an
// unknown Conveyor tensor. Does not compare lm_head.weight with wte.weight (never read).
absl::StatusOr<GlobalTensorMap> HfToConveyorGpt2Elements(
    const Gpt2Dims& dims, const std::map<std::string, std::vector<int64_t>>& wanted,
    const HfShapeOf& shape_of, const HfRangeReader& read);

// The names among `names` (a folder's tensors) that the model `dims` has no place for:
// not one of its tensors (with or without "transformer."), a mask buffer or lm_head.
std::vector<std::string> UnexpectedGpt2Tensors(const std::vector<std::string>& names,
                                               const Gpt2Dims& dims);

// GPT-2's attention-mask buffers ("[transformer.]h.N.attn.bias", "...masked_bias"):
// saved by some versions of transformers, never weights, so importers skip them.
bool IsGpt2MaskBuffer(const std::string& hf_name);

// The layout steps, exposed for tests. A qkv row index in Conveyor's grouped layout
// and the matching c_attn output column in HF's [Q | K | V] layout.
int64_t GroupedQkvRowToHfColumn(int64_t row, int64_t heads, int64_t head_dim);
int64_t HfColumnToGroupedQkvRow(int64_t column, int64_t heads, int64_t head_dim);
// [rows, cols] -> [cols, rows].
std::vector<float> Transpose(const std::vector<float>& matrix, int64_t rows, int64_t cols);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_GPT2_MAPPING_H_
