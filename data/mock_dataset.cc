#include "data/mock_dataset.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace conveyor {
namespace {

// SplitMix64's finaliser: a cheap bijection whose outputs for consecutive
// inputs are statistically independent.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

MockSampleSource::MockSampleSource(int64_t seed, int vocab_size, int seq_length,
                                   int64_t num_samples)
    : seed_(seed), vocab_size_(vocab_size), seq_length_(seq_length), num_samples_(num_samples) {}

absl::StatusOr<std::vector<int32_t>> MockSampleSource::Sample(int64_t index) const {
  if (vocab_size_ <= 0 || seq_length_ <= 0 || num_samples_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("mock data needs positive vocab size, sequence length and sample count, got ",
                     vocab_size_, ", ", seq_length_, ", ", num_samples_));
  }
  const int64_t wrapped = ((index % num_samples_) + num_samples_) % num_samples_;
  const uint64_t key = Mix(Mix(uint64_t(seed_)) ^ uint64_t(wrapped));
  // Each sample counts through the vocabulary from a random start with a random
  // stride of 1, 2 or 3 (mod vocab): random enough that nothing is memorised, but
  // with structure a model learns in a few dozen steps (the stride has to be read
  // from the context), so a run on mock data shows a falling loss.
  const uint64_t start = Mix(key) % uint64_t(vocab_size_);
  const uint64_t stride = 1 + Mix(key ^ 1) % 3;
  std::vector<int32_t> tokens(seq_length_ + 1);
  for (int p = 0; p <= seq_length_; ++p) {
    tokens[p] = int32_t((start + stride * uint64_t(p)) % uint64_t(vocab_size_));
  }
  return tokens;
}

}  // namespace conveyor
