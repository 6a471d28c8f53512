// The TCP store's messages, shared by its server and its clients.
//
// Every connection opens with a handshake. The client sends kHello and its Membership
// (global rank, WORLD_SIZE, job); the server answers kWelcome and global rank 0's, then,
// once it has decided, its verdict as a blob: empty to admit the client, else why it
// was refused (EncodeVerdict), after which the server closes the connection. A
// program other than a Conveyor store answers something else, or nothing, or closes the
// connection: the client tells at the first byte that differs, or when its timeout ends.
// Both magic strings end in a blank line, so that a server of a line-based protocol
// (HTTP) takes the hello for a whole, malformed request and answers it at once.
//
// Then requests: one operation byte, then the key and the value, each as a 32-bit length
// (host order: the store serves one job, whose nodes share an architecture) and the
// bytes. kSet is answered with one byte once the value is stored, so a set is visible to
// every later get; kGet with one byte (found or not) and, when found, the value as
// length and bytes; kPost (progress boards: best effort, on every collective) is not
// answered.
#ifndef CONVEYOR_PARALLEL_TCP_STORE_WIRE_H_
#define CONVEYOR_PARALLEL_TCP_STORE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace conveyor::tcp_store {

enum class Op : uint8_t { kSet = 1, kGet = 2, kPost = 3 };

// Version 2 added the verdict.
inline constexpr absl::string_view kHello = "CONVEYOR-STORE/2 HELLO\r\n\r\n";
inline constexpr absl::string_view kWelcome = "CONVEYOR-STORE/2 WELCOME\r\n\r\n";

// Who is at either end of a connection: the client's rank, or global rank 0 for the
// server. `job_id` is RankEnvironment::job_id (empty when the launcher names no job).
struct Membership {
  int rank = 0;
  int world_size = 1;
  std::string job_id;
};

// Keys and values beyond this are refused (a stray client cannot make the server
// allocate gigabytes).
inline constexpr uint32_t kMaxBlobBytes = 16 << 20;

// Waits until `fd` is ready for `events` (poll(2)) or `deadline` passes; false on the
// latter. A closed or failed socket counts as ready: the next call on it says so.
bool WaitReady(int fd, short events, absl::Time deadline);

// Whole-buffer socket I/O, retried on EINTR; false on error, at the end of the stream,
// or once `deadline` has passed (absl::InfiniteFuture(): no limit).
bool WriteAll(int fd, const void* data, size_t n, absl::Time deadline);
bool ReadAll(int fd, void* data, size_t n, absl::Time deadline);

// A length-prefixed string.
bool WriteBlob(int fd, absl::string_view blob, absl::Time deadline);
bool ReadBlob(int fd, std::string* blob, absl::Time deadline);

// The Membership that follows kHello and kWelcome: rank and world size as 32-bit
// numbers, then the job as a blob.
bool WriteMembership(int fd, const Membership& member, absl::Time deadline);
bool ReadMembership(int fd, Membership* member, absl::Time deadline);

// A job id for messages: quoted, or "none (...)" when the launcher names no job.
std::string DescribeJob(const std::string& job_id);

// A refusal as the verdict carries it: the status code as a number, a space, the
// message; DecodeVerdict reads it back (Unknown for a malformed one).
std::string EncodeVerdict(const absl::Status& refusal);
absl::Status DecodeVerdict(absl::string_view verdict);

}  // namespace conveyor::tcp_store

#endif  // CONVEYOR_PARALLEL_TCP_STORE_WIRE_H_
