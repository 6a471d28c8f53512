// The element types a Megatron indexed dataset may store, with the codes its
// .idx header uses for them.
#ifndef CONVEYOR_DATA_TOKEN_DTYPE_H_
#define CONVEYOR_DATA_TOKEN_DTYPE_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace conveyor {

// Values are the on-disk codes; they are part of the file format.
enum class TokenDType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

// The dtype for header code `code`, or nullopt for a code Megatron does not
// define.
std::optional<TokenDType> TokenDTypeFromCode(uint8_t code);

int TokenDTypeSize(TokenDType dtype);
absl::string_view TokenDTypeName(TokenDType dtype);  // numpy's name

// Megatron's choice for token files: uint16 when every id fits with room to
// spare (vocab_size < 65500), int32 otherwise.
TokenDType TokenDTypeForVocab(int64_t vocab_size);

// Reads element `i` of a `dtype` array at `data` (unaligned, little-endian
// host) as int64; floats are truncated as numpy's astype(int64) does.
int64_t LoadToken(TokenDType dtype, const void* data, int64_t i);

// Stores `value` as element `i`, converting as numpy's astype does (integer
// types wrap modulo their width).
void StoreToken(TokenDType dtype, int64_t value, void* data, int64_t i);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKEN_DTYPE_H_
