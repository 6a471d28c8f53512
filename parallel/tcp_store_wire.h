// The TCP store's messages, shared by its server and its clients. A request is one
// operation byte, then the key and the value, each as a 32-bit length (host order: the
// store serves one job, whose nodes share an architecture) and the bytes. kSet is
// answered with one byte once the value is stored, so a set is visible to every later
// get; kGet with one byte (found or not) and, when found, the value as length and bytes;
// kPost (progress boards: best effort, on every collective) is not answered.
#ifndef CONVEYOR_PARALLEL_TCP_STORE_WIRE_H_
#define CONVEYOR_PARALLEL_TCP_STORE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace conveyor::tcp_store {

enum class Op : uint8_t { kSet = 1, kGet = 2, kPost = 3 };

// Keys and values beyond this are refused (a stray client cannot make the server
// allocate gigabytes).
inline constexpr uint32_t kMaxBlobBytes = 16 << 20;

// Whole-buffer socket I/O, retried on EINTR; false on error or end of stream.
bool WriteAll(int fd, const void* data, size_t n);
bool ReadAll(int fd, void* data, size_t n);

// A length-prefixed string.
bool WriteBlob(int fd, absl::string_view blob);
bool ReadBlob(int fd, std::string* blob);

}  // namespace conveyor::tcp_store

#endif  // CONVEYOR_PARALLEL_TCP_STORE_WIRE_H_
