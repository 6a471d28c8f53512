#include "data/tokenizers/sentencepiece_model.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace conveyor {

constexpr char kShimName[] = "libconveyor_sentencepiece.so";

// The shim's C functions (sentencepiece_shim.cc).
struct SentencePieceShim {
  void* (*load)(const char*, char**);
  void (*free_processor)(void*);
  int (*encode)(const void*, const char*, size_t, int**, size_t*, char**);
  int (*decode)(const void*, const int*, size_t, char**, size_t*, char**);
  int (*size)(const void*);
  const char* (*piece)(const void*, int);
  int (*piece_to_id)(const void*, const char*);
  int (*special_id)(const void*, int);
};

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Where the shim may be: CONVEYOR_SENTENCEPIECE_SHIM, beside the executable
// (bazel-bin/data/preprocess), or in its runfiles (tests, the trainer).
std::vector<std::string> ShimPaths() {
  std::vector<std::string> paths;
  if (!Env("CONVEYOR_SENTENCEPIECE_SHIM").empty())
    paths.push_back(Env("CONVEYOR_SENTENCEPIECE_SHIM"));
  const std::string in_workspace = std::string("/conveyor/data/tokenizers/") + kShimName;
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string self(exe, n);
    paths.push_back(self.substr(0, self.rfind('/') + 1) + kShimName);
    paths.push_back(self + ".runfiles" + in_workspace);
  }
  for (const char* root : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (!Env(root).empty()) paths.push_back(Env(root) + in_workspace);
  }
  return paths;
}

template <typename F>
absl::Status Bind(void* handle, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(::dlsym(handle, name));
  if (*fn == nullptr) {
    return absl::InternalError(absl::StrCat(kShimName, " lacks ", name, ": rebuild it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const SentencePieceShim*> OpenShim() {
  std::vector<std::string> tried;
  void* handle = nullptr;
  for (const std::string& path : ShimPaths()) {
    // RTLD_LOCAL | RTLD_DEEPBIND: libsentencepiece's protobuf stays private.
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle != nullptr) break;
    tried.push_back(absl::StrCat(path, " (", ::dlerror(), ")"));
  }
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the SentencePiece tokenizers need ", kShimName,
                     " (bazel build //data/tokenizers:libconveyor_sentencepiece.so; tools/setup.sh installs "
                     "libsentencepiece-dev); set CONVEYOR_SENTENCEPIECE_SHIM to its path. Tried: ",
                     absl::StrJoin(tried, "; ")));
  }
  auto shim = std::make_unique<SentencePieceShim>();
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_load", &shim->load));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_free", &shim->free_processor));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_encode", &shim->encode));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_decode", &shim->decode));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_size", &shim->size));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_piece", &shim->piece));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_piece_to_id", &shim->piece_to_id));
  RETURN_IF_ERROR(Bind(handle, "conveyor_spm_special_id", &shim->special_id));
  return shim.release();  // lives as long as the process, as the library does
}

// Takes ownership of a malloc'd error message.
std::string TakeString(char* s) {
  std::string out = s == nullptr ? "" : s;
  std::free(s);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Load(
    const std::string& path) {
  static const absl::StatusOr<const SentencePieceShim*>* const shim =
      new absl::StatusOr<const SentencePieceShim*>(OpenShim());
  if (!shim->ok()) return shim->status();
  char* error = nullptr;
  void* processor = (**shim)->load(path.c_str(), &error);
  if (processor == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a SentencePiece model (", TakeString(error), ")"));
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(**shim, processor, path));
}

SentencePieceModel::~SentencePieceModel() { shim_->free_processor(processor_); }

absl::StatusOr<std::vector<int>> SentencePieceModel::Encode(absl::string_view text) const {
  int* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  if (!shim_->encode(processor_, text.data(), text.size(), &ids, &n, &error)) {
    return absl::InternalError(absl::StrCat(path_, ": encoding failed: ", TakeString(error)));
  }
  std::vector<int> out(ids, ids + n);
  std::free(ids);
  return out;
}

absl::StatusOr<std::string> SentencePieceModel::Decode(const std::vector<int>& ids) const {
  char* text = nullptr;
  size_t size = 0;
  char* error = nullptr;
  if (!shim_->decode(processor_, ids.data(), ids.size(), &text, &size, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": decoding failed: ", TakeString(error)));
  }
  std::string out(text, size);
  std::free(text);
  return out;
}

int SentencePieceModel::size() const { return shim_->size(processor_); }

int SentencePieceModel::IdOf(const std::string& piece) const {
  // SentencePiece answers unk's id for a piece it does not know.
  const int id = shim_->piece_to_id(processor_, piece.c_str());
  return id >= 0 && id < size() && Piece(id) == piece ? id : -1;
}

std::string SentencePieceModel::Piece(int id) const { return shim_->piece(processor_, id); }
int SentencePieceModel::bos_id() const { return shim_->special_id(processor_, 0); }
int SentencePieceModel::eos_id() const { return shim_->special_id(processor_, 1); }
int SentencePieceModel::pad_id() const { return shim_->special_id(processor_, 2); }

}  // namespace conveyor
