// A C interface to Debian's libsentencepiece, built as its own shared object
// (libconveyor_sentencepiece.so) and opened by sentencepiece_model.cc with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND).
//
// Why: libsentencepiece.so carries its own copy of protobuf-lite and exports
// its symbols. Linked into a binary that also links libprotobuf.so (every
// Conveyor tool does, for its flags), one library's copy replaces the other's
// and the process crashes at start-up. Opened locally and deep-bound, the
// library and its protobuf stay private to this shim.
//
// Only the C++ standard library and SentencePiece are used here: Debian's
// sentencepiece_processor.h also declares `namespace absl`, which clashes with
// Abseil.
#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.data(), s.size() + 1);
  return out;
}

bool Failed(const sentencepiece::util::Status& status, char** error) {
  if (status.ok()) return false;
  *error = CopyString(status.ToString());
  return true;
}

}  // namespace

extern "C" {

// nullptr with *error (malloc'd) set on failure.
void* conveyor_spm_load(const char* path, char** error) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  if (Failed(processor->Load(path), error)) {
    delete processor;
    return nullptr;
  }
  return processor;
}

void conveyor_spm_free(void* processor) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(processor);
}

// *ids (malloc'd, *n of them) on success; *error (malloc'd) on failure.
int conveyor_spm_encode(const void* processor, const char* text, size_t size, int** ids, size_t* n,
                        char** error) {
  std::vector<int> out;
  const auto* p = static_cast<const sentencepiece::SentencePieceProcessor*>(processor);
  if (Failed(p->Encode(std::string_view(text, size), &out), error)) return 0;
  *n = out.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.empty() ? 1 : out.size())));
  if (!out.empty()) std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  return 1;
}

// *text (malloc'd, *size bytes) on success; *error (malloc'd) on failure.
int conveyor_spm_decode(const void* processor, const int* ids, size_t n, char** text, size_t* size,
                        char** error) {
  std::string out;
  const auto* p = static_cast<const sentencepiece::SentencePieceProcessor*>(processor);
  if (Failed(p->Decode(std::vector<int>(ids, ids + n), &out), error)) return 0;
  *size = out.size();
  *text = CopyString(out);
  return 1;
}

int conveyor_spm_size(const void* processor) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize();
}

// The piece of `id` (owned by the processor).
const char* conveyor_spm_piece(const void* processor, int id) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)
      ->IdToPiece(id)
      .c_str();
}

int conveyor_spm_piece_to_id(const void* processor, const char* piece) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->PieceToId(piece);
}

// 0: bos, 1: eos, 2: pad.
int conveyor_spm_special_id(const void* processor, int which) {
  const auto* p = static_cast<const sentencepiece::SentencePieceProcessor*>(processor);
  return which == 0 ? p->bos_id() : which == 1 ? p->eos_id() : p->pad_id();
}

}  // extern "C"
