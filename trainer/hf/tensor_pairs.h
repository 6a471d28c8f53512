// How one Conveyor parameter is stored in a Hugging Face folder: the HF tensors
// ("pieces") that hold it and how its rows come from them. The Llama-family mapping
// (llama_mapping.h), its mixture-of-experts layers (moe_mapping.h) and multi-latent
// attention (mla_mapping.h) are lists of
// these pairs; one converter walks them both ways.
#ifndef CONVEYOR_TRAINER_HF_TENSOR_PAIRS_H_
#define CONVEYOR_TRAINER_HF_TENSOR_PAIRS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

// How a Conveyor tensor's rows come from its HF pieces.
enum class Rows {
  kSame,        // one piece, row for row
  kVocab,       // one piece of `vocab` rows; Conveyor's further rows are padding
  kGroupedQkv,  // pieces q, k, v, interleaved per key/value group
  kGateUp,      // pieces gate, up, one after the other (SwiGLU's fc1 = [gate | up])
  // One piece in blocks of `rope_block` rows whose rows from `rope_offset` on are a
  // rotated part stored interleaved (HF row 2j pairs with 2j + 1) where Conveyor's RoPE
  // pairs halves (row j with j + d/2): Conveyor's row offset + j is HF's offset + 2j,
  // offset + d/2 + j is offset + 2j + 1 (DeepSeek-V3's rope_interleave).
  kInterleavedRope,
};

struct TensorPair {
  std::string conveyor;
  std::vector<int64_t> conveyor_shape;
  Rows rows;
  std::vector<std::string> hf;  // the pieces' names
  std::vector<std::vector<int64_t>> hf_shapes;
  int64_t rope_block = 0;   // kInterleavedRope only
  int64_t rope_offset = 0;  // kInterleavedRope only
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_TENSOR_PAIRS_H_
