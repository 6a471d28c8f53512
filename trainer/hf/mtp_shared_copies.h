// DeepSeek-V3's checkpoints store, in each multi-token prediction layer
// model.layers.{N+k}, copies of the embedding (embed_tokens) and of the output layer
// (shared_head.head), which the model shares with its main embedding and lm_head
// (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, §2.2: the MTP modules' embedding
// layer and output head are the main model's). Conveyor shares them too, so an import
// reads the originals, and a copy that holds other values would change the math if
// dropped: it is refused by name instead.
#ifndef CONVEYOR_TRAINER_HF_MTP_SHARED_COPIES_H_
#define CONVEYOR_TRAINER_HF_MTP_SHARED_COPIES_H_

#include "absl/status/status.h"
#include "trainer/hf/gpt2_mapping.h"
#include "trainer/hf/llama_mapping.h"
#include "trainer/hf/mapped_weights.h"

namespace conveyor {

// Reads like weights->Read and, for an HF tensor that `dims`' depths copy, reads the same
// elements of each copy the folder holds: InvalidArgument naming the copy, its file and
// the fix when its shape or one element differs from the original's (compared as the
// fp32 bits both widen to, exact for F32, BF16 and F16). A tensor-parallel rank so
// compares the rows it keeps; together the ranks holding the tensor compare all of it.
// `weights` must outlive the reader.
HfRangeReader ReadComparingSharedCopies(const LlamaDims& dims, MappedHfWeights* weights);

// Every copy compared whole with its original, as that reader compares it.
absl::Status CheckSharedCopies(const LlamaDims& dims, MappedHfWeights* weights);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MTP_SHARED_COPIES_H_
