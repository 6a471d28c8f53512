#include "runtime/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace conveyor {
namespace {

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One cgroup hierarchy that can limit memory: where it is mounted, the part of
// the hierarchy the mount shows, and the file that holds a group's limit.
struct MemoryHierarchy {
  std::string mount_point;
  std::string mount_root;
  const char* limit_file;
};

// From /proc/self/mountinfo lines such as
//   35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
//   41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
// the v1 memory hierarchy and the v2 one.
void FindHierarchies(const std::string& mountinfo, std::optional<MemoryHierarchy>* v1,
                     std::optional<MemoryHierarchy>* v2) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> halves = absl::StrSplit(line, " - ");
    if (halves.size() != 2) continue;
    const std::vector<absl::string_view> mount = absl::StrSplit(halves[0], ' ');
    const std::vector<absl::string_view> fs = absl::StrSplit(halves[1], ' ');
    if (mount.size() < 5 || fs.size() < 3) continue;
    MemoryHierarchy h{std::string(mount[4]), std::string(mount[3]), nullptr};
    if (fs[0] == "cgroup2") {
      h.limit_file = "memory.max";
      *v2 = h;
    } else if (fs[0] == "cgroup") {
      const std::vector<absl::string_view> options = absl::StrSplit(fs[2], ',');
      if (std::find(options.begin(), options.end(), "memory") == options.end()) continue;
      h.limit_file = "memory.limit_in_bytes";
      *v1 = h;
    }
  }
}

// The process's group in `hierarchy` (its /proc/self/cgroup path) and every
// ancestor the mount shows: the tightest limit among their limit files.
void TightenByHierarchy(const std::string& root, const MemoryHierarchy& hierarchy,
                        absl::string_view group, HostMemoryLimit* limit) {
  // Inside a container the group may lie outside the mounted part; the mount's
  // top is then the container's own group.
  const std::string root_dir = std::string(absl::StripSuffix(hierarchy.mount_root, "/")) + "/";
  std::string relative;
  if (absl::StartsWith(absl::StrCat(group, "/"), root_dir)) {
    relative = std::string(group.substr(root_dir.size() - 1));
  }
  std::string dir = absl::StrCat(hierarchy.mount_point, "/", absl::StripPrefix(relative, "/"));
  while (true) {
    dir = std::string(absl::StripSuffix(dir, "/"));
    const std::string file = absl::StrCat(dir, "/", hierarchy.limit_file);
    int64_t bytes = 0;
    if (std::optional<std::string> text = ReadText(root + file);
        text && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &bytes) &&
        bytes < limit->bytes) {
      *limit = {bytes, absl::StrCat("the cgroup limit ", file)};
    }
    if (dir.size() <= hierarchy.mount_point.size()) break;
    dir = dir.substr(0, dir.rfind('/'));
  }
}

}  // namespace

HostMemoryLimit HostMemoryLimitUnder(const std::string& root, int64_t physical_bytes) {
  HostMemoryLimit limit{physical_bytes, "physical memory"};
  std::optional<MemoryHierarchy> v1, v2;
  FindHierarchies(ReadText(root + "/proc/self/mountinfo").value_or(""), &v1, &v2);
  // /proc/self/cgroup: "4:memory:/a/b" per v1 hierarchy, "0::/a/b" for v2.
  for (absl::string_view line :
       absl::StrSplit(ReadText(root + "/proc/self/cgroup").value_or(""), '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    const std::vector<absl::string_view> controllers = absl::StrSplit(fields[1], ',');
    if (fields[0] == "0" && fields[1].empty() && v2) {
      TightenByHierarchy(root, *v2, fields[2], &limit);
    } else if (v1 &&
               std::find(controllers.begin(), controllers.end(), "memory") != controllers.end()) {
      TightenByHierarchy(root, *v1, fields[2], &limit);
    }
  }
  return limit;
}

ProcessMemory ProcessMemoryFromStatus(absl::string_view status) {
  ProcessMemory memory;
  for (absl::string_view line : absl::StrSplit(status, '\n', absl::SkipEmpty())) {
    int64_t* field = absl::StartsWith(line, "VmHWM:")     ? &memory.peak_bytes
                     : absl::StartsWith(line, "RssAnon:") ? &memory.anonymous_bytes
                                                          : nullptr;
    if (field == nullptr) continue;
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(line.find(':') + 1));
    int64_t kib = 0;
    if (absl::ConsumeSuffix(&value, "kB") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &kib)) {
      *field = kib * 1024;
    }
  }
  return memory;
}

ProcessMemory ThisProcessMemory() {
  return ProcessMemoryFromStatus(ReadText("/proc/self/status").value_or(""));
}

HostMemoryLimit HostMemoryAvailable() {
  const int64_t pages = ::sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = ::sysconf(_SC_PAGESIZE);
  const int64_t physical =
      pages > 0 && page_size > 0 ? pages * page_size : std::numeric_limits<int64_t>::max();
  return HostMemoryLimitUnder("", physical);
}

int64_t SaturatingBytes(double bytes) {
  constexpr double kMax = double(std::numeric_limits<int64_t>::max());
  return bytes >= kMax ? std::numeric_limits<int64_t>::max() : int64_t(bytes);
}

std::string FormatMemorySize(int64_t bytes) {
  constexpr double kMiB = 1 << 20;
  if (bytes < (int64_t{1} << 30)) return absl::StrFormat("%.1f MiB", double(bytes) / kMiB);
  return absl::StrFormat("%.1f GiB", double(bytes) / (1024 * kMiB));
}

absl::Status CheckHostMemory(int64_t bytes, absl::string_view what, const HostMemoryLimit& limit) {
  if (bytes <= limit.bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " need ", FormatMemorySize(bytes), " of host memory, but this process may use ",
                   FormatMemorySize(limit.bytes), " (", limit.source, ")"));
}

}  // namespace conveyor
