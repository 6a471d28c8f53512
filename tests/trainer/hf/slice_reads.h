// The per-rank slice reads of --load-hf (ReadHfSlices), checked against a whole read:
// shared by the GPT-2, Llama-family, mixture-of-experts and DeepSeek-V3 reference tests.
#ifndef CONVEYOR_TESTS_TRAINER_HF_SLICE_READS_H_
#define CONVEYOR_TESTS_TRAINER_HF_SLICE_READS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/tensor_parallel.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/export.h"
#include "trainer/hf/safetensors.h"

namespace conveyor::testing_util {

// The bytes of `weights`' tensor data as F32 in a safetensors file: what a whole read
// of a folder written from them reads.
int64_t F32DataBytes(const HfTensorMap& weights);

// For the rank of the model in `dir` that `parallel` places (`rank` names it in
// messages): reads the elements its parameters keep, expects each equal to `whole`'s at
// the same global index and 4 bytes (F32) read per element kept; returns the bytes read.
int64_t ExpectRankReadsMatchWholeRead(const std::string& dir, const ResolvedConfig& config,
                                      const GlobalTensorMap& whole, const TensorParallel& parallel,
                                      const std::string& rank);

// For each of `tp` tensor-parallel ranks of the model in `dir`: reads the elements its
// parameters keep, expects each equal to `whole`'s at the same global index and 4 bytes
// (F32) read per element kept, and returns the bytes each rank read.
std::vector<int64_t> ExpectSliceReadsMatchWholeRead(const std::string& dir,
                                                    const ResolvedConfig& config,
                                                    const GlobalTensorMap& whole, int tp);

// A mixture of experts in `dir` read by each rank of three layouts: EP 2, TP 2 (with
// ETP 2) and TP 2 with ETP 1 and EP 2 (the experts' groups beside TP). Each rank's read
// is checked as ExpectRankReadsMatchWholeRead does and must stay below `file_bytes`,
// the folder's whole weights.
void ExpectExpertLayoutReadsMatchWholeRead(const std::string& dir, const ResolvedConfig& config,
                                           const GlobalTensorMap& whole, int64_t file_bytes);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_TRAINER_HF_SLICE_READS_H_
