// Shared pieces of the Hugging Face tests: a small GPT-2-shaped config, and parameters
// whose values identify the tensor and element.
#ifndef CONVEYOR_TESTS_TRAINER_HF_HF_TEST_UTIL_H_
#define CONVEYOR_TESTS_TRAINER_HF_HF_TEST_UTIL_H_

#include <string>

#include "proto/config.pb.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor {
namespace testing_util {

// GPT-2's architecture at toy size: 2 layers, hidden 8, 2 heads, 16 positions,
// vocabulary 50 padded to 64 (multiple of 16 x TP 2).
Config SmallGpt2Config();

// Every parameter of `dims`, each element a distinct non-zero value, padding rows
// included (a trained model's padding rows are not zero).
GlobalTensorMap PatternParameters(const Gpt2Dims& dims);

// `tensors` with the word embedding's rows from `dims.vocab` on set to zero: what an
// export then import gives back.
GlobalTensorMap WithZeroPadding(GlobalTensorMap tensors, const Gpt2Dims& dims);

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_TRAINER_HF_HF_TEST_UTIL_H_
