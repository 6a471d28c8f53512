// A SentencePiece model (tokenizer.model) through Debian's libsentencepiece,
// reached via the shim library sentencepiece_shim.cc builds
// (libconveyor_sentencepiece.so), which is opened privately: see there why
// libsentencepiece cannot be linked into a binary that uses libprotobuf.
#ifndef CONVEYOR_DATA_TOKENIZERS_SENTENCEPIECE_MODEL_H_
#define CONVEYOR_DATA_TOKENIZERS_SENTENCEPIECE_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

struct SentencePieceShim;

class SentencePieceModel {
 public:
  // Errors name `path` (or the shim library, when it cannot be found).
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Load(const std::string& path);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  // Thread-safe (SentencePiece's encoding and decoding are const).
  absl::StatusOr<std::vector<int>> Encode(absl::string_view text) const;
  absl::StatusOr<std::string> Decode(const std::vector<int>& ids) const;

  int size() const;
  // -1 when `piece` is not in the model.
  int IdOf(const std::string& piece) const;
  std::string Piece(int id) const;
  int bos_id() const;
  int eos_id() const;
  int pad_id() const;

 private:
  SentencePieceModel(const SentencePieceShim* shim, void* processor, std::string path)
      : shim_(shim), processor_(processor), path_(std::move(path)) {}
  const SentencePieceShim* shim_;
  void* processor_;
  std::string path_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_SENTENCEPIECE_MODEL_H_
