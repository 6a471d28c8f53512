// A Hugging Face folder's safetensors weights (model.safetensors, or the shards of
// model.safetensors.index.json) memory-mapped and read by element range: a
// tensor-parallel rank reads only the rows or columns it keeps, so only those pages are
// ever touched. The data bytes read are counted (the headers, read once, are not).
#ifndef CONVEYOR_TRAINER_HF_MAPPED_WEIGHTS_H_
#define CONVEYOR_TRAINER_HF_MAPPED_WEIGHTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/mapped_file.h"
#include "trainer/hf/safetensors.h"

namespace conveyor {

class MappedHfWeights {
 public:
  // Maps the folder's weight files and reads their headers; errors name the file (the
  // index's, or a shard's) as ReadHfWeights' do.
  static absl::StatusOr<MappedHfWeights> Open(const std::string& dir);

  // The tensor's header entry; null when no file of the folder holds it.
  const SafetensorsEntry* Find(const std::string& name) const;
  // The path of the file that holds the tensor; empty when none does.
  std::string FileOf(const std::string& name) const;
  // Every tensor's name, sorted.
  std::vector<std::string> Names() const;

  // Elements [begin, begin + count) of `name`, row-major, widened to fp32 into `out`.
  // NotFound or InvalidArgument (a range past the tensor, a dtype that is no weight)
  // naming the file and the tensor.
  absl::Status Read(const std::string& name, int64_t begin, int64_t count, float* out);

  int64_t bytes_read() const { return bytes_read_; }

  // OK when every element Read so far is finite; else NonFiniteWeightsError for each
  // tensor that held NaN or infinite values (its file, and how many of the elements
  // read), one per line. Counted as Read widens, so it costs no second pass.
  absl::Status CheckFinite() const;

 private:
  struct Located {
    const MappedFile* file;
    SafetensorsEntry entry;
    int64_t elements_read = 0;
    int64_t non_finite = 0;
  };
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, Located> tensors_;
  int64_t bytes_read_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MAPPED_WEIGHTS_H_
