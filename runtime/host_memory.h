// How much host memory this process may use, so that a size computed from flags
// can be refused with a clear message before an allocation of it throws
// std::bad_alloc or wakes the kernel's OOM killer.
#ifndef CONVEYOR_RUNTIME_HOST_MEMORY_H_
#define CONVEYOR_RUNTIME_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

struct HostMemoryLimit {
  int64_t bytes = 0;
  // Where the limit comes from: "physical memory" or "the cgroup limit <file>".
  std::string source;
};

// The tightest memory limit of this process's cgroup and its ancestors (v2
// memory.max, v1 memory.limit_in_bytes) when one is below physical memory, else
// physical memory.
HostMemoryLimit HostMemoryAvailable();

// The same, with /proc and the cgroup mounts read under `root` (a stand-in for
// "/" in tests) and `physical_bytes` as physical memory.
HostMemoryLimit HostMemoryLimitUnder(const std::string& root, int64_t physical_bytes);

// This process's resident memory as /proc/self/status counts it: the peak so far
// (VmHWM) and the anonymous part now (RssAnon, heaps and private buffers; the rest of
// the resident set is mapped files: the program and its libraries).
struct ProcessMemory {
  int64_t peak_bytes = 0;
  int64_t anonymous_bytes = 0;
};

// This process's, or zeros where /proc cannot be read.
ProcessMemory ThisProcessMemory();

// The same, from the text of a /proc/<pid>/status file ("VmHWM:  276848 kB").
ProcessMemory ProcessMemoryFromStatus(absl::string_view status);

// A size computed in double from flag values (so that products of them cannot
// overflow) as int64 bytes, saturating at the int64 maximum.
int64_t SaturatingBytes(double bytes);

// "12.3 GiB": `bytes` in GiB with one decimal; below 1 GiB in MiB ("16.1 MiB"), so
// that small figures stay readable.
std::string FormatMemorySize(int64_t bytes);

// ResourceExhausted when `bytes` exceed `limit`: "<what> need 372.5 GiB of host
// memory, but this process may use 15.5 GiB (<source>)". Callers append the
// flags that set the size and the fix.
absl::Status CheckHostMemory(int64_t bytes, absl::string_view what,
                             const HostMemoryLimit& limit = HostMemoryAvailable());

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_HOST_MEMORY_H_
