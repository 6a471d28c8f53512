#include "data/token_dtype.h"

#include <cstring>

namespace conveyor {
namespace {

template <typename T>
int64_t Load(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return static_cast<int64_t>(v);
}

template <typename T>
void Store(int64_t value, void* data, int64_t i) {
  const T v = static_cast<T>(value);
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

std::optional<TokenDType> TokenDTypeFromCode(uint8_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<TokenDType>(code);
}

int TokenDTypeSize(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUint8:
    case TokenDType::kInt8:
      return 1;
    case TokenDType::kInt16:
    case TokenDType::kUint16:
      return 2;
    case TokenDType::kInt32:
    case TokenDType::kFloat32:
      return 4;
    case TokenDType::kInt64:
    case TokenDType::kFloat64:
      return 8;
  }
  return 0;
}

absl::string_view TokenDTypeName(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUint8:
      return "uint8";
    case TokenDType::kInt8:
      return "int8";
    case TokenDType::kInt16:
      return "int16";
    case TokenDType::kInt32:
      return "int32";
    case TokenDType::kInt64:
      return "int64";
    case TokenDType::kFloat64:
      return "float64";
    case TokenDType::kFloat32:
      return "float32";
    case TokenDType::kUint16:
      return "uint16";
  }
  return "unknown";
}

TokenDType TokenDTypeForVocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::kUint16 : TokenDType::kInt32;
}

int64_t LoadToken(TokenDType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case TokenDType::kUint8:
      return Load<uint8_t>(data, i);
    case TokenDType::kInt8:
      return Load<int8_t>(data, i);
    case TokenDType::kInt16:
      return Load<int16_t>(data, i);
    case TokenDType::kInt32:
      return Load<int32_t>(data, i);
    case TokenDType::kInt64:
      return Load<int64_t>(data, i);
    case TokenDType::kFloat64:
      return Load<double>(data, i);
    case TokenDType::kFloat32:
      return Load<float>(data, i);
    case TokenDType::kUint16:
      return Load<uint16_t>(data, i);
  }
  return 0;
}

void StoreToken(TokenDType dtype, int64_t value, void* data, int64_t i) {
  switch (dtype) {
    case TokenDType::kUint8:
      return Store<uint8_t>(value, data, i);
    case TokenDType::kInt8:
      return Store<int8_t>(value, data, i);
    case TokenDType::kInt16:
      return Store<int16_t>(value, data, i);
    case TokenDType::kInt32:
      return Store<int32_t>(value, data, i);
    case TokenDType::kInt64:
      return Store<int64_t>(value, data, i);
    case TokenDType::kFloat64:
      return Store<double>(value, data, i);
    case TokenDType::kFloat32:
      return Store<float>(value, data, i);
    case TokenDType::kUint16:
      return Store<uint16_t>(value, data, i);
  }
}

}  // namespace conveyor
