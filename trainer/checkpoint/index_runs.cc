#include "trainer/checkpoint/index_runs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace conveyor {

int64_t CountElements(const std::vector<IndexRun>& runs) {
  int64_t n = 0;
  for (const IndexRun& run : runs) n += run.elements();
  return n;
}

void AppendBlock(std::vector<IndexRun>* runs, int64_t start, int64_t length) {
  if (length <= 0) return;
  if (!runs->empty()) {
    IndexRun& last = runs->back();
    if (last.count == 1 && last.start + last.length == start) {
      last.length += length;  // contiguous: one longer block
      return;
    }
    if (last.length == length) {
      if (last.count == 1 && start - last.start > length) {
        last.stride = start - last.start;  // second block fixes the stride
        last.count = 2;
        return;
      }
      if (last.count > 1 && start == last.start + last.count * last.stride) {
        ++last.count;
        return;
      }
    }
  }
  runs->push_back({start, length, 1, 0});
}

std::vector<IndexRun> RunsFromGlobalIndices(const std::vector<int64_t>& indices) {
  std::vector<IndexRun> runs;
  size_t i = 0;
  while (i < indices.size()) {
    size_t j = i + 1;
    while (j < indices.size() && indices[j] == indices[j - 1] + 1) ++j;
    AppendBlock(&runs, indices[i], static_cast<int64_t>(j - i));
    i = j;
  }
  return runs;
}

std::vector<IndexRun> ElementRange(int64_t start, int64_t length) {
  std::vector<IndexRun> runs;
  AppendBlock(&runs, start, length);
  return runs;
}

std::vector<IndexRun> SliceRuns(const std::vector<IndexRun>& runs, int64_t begin, int64_t end) {
  std::vector<IndexRun> out;
  int64_t local = 0;  // local position of the current run's first element
  for (const IndexRun& run : runs) {
    const int64_t run_end = local + run.elements();
    if (run_end > begin && local < end) {
      if (local >= begin && run_end <= end) {
        out.push_back(run);  // wholly inside: keep it strided
      } else {
        // Cut blocks: at most the first and last are partial.
        for (int64_t c = 0; c < run.count; ++c) {
          const int64_t block_local = local + c * run.length;
          const int64_t lo = std::max(begin, block_local);
          const int64_t hi = std::min(end, block_local + run.length);
          if (lo < hi) AppendBlock(&out, run.start + c * run.stride + (lo - block_local), hi - lo);
        }
      }
    }
    local = run_end;
  }
  return out;
}

absl::Status ValidateRuns(const std::vector<IndexRun>& runs, int64_t numel,
                          const std::string& what) {
  for (size_t i = 0; i < runs.size(); ++i) {
    const IndexRun& r = runs[i];
    const auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": run ", i, " {start ", r.start,
                                                     ", length ", r.length, ", count ", r.count,
                                                     ", stride ", r.stride, "} ", why));
    };
    if (r.start < 0 || r.length < 0 || r.count < 1) {
      return bad("needs start >= 0, length >= 0 and count >= 1");
    }
    if (r.count > 1 && r.stride < r.length) {
      return bad("has blocks that overlap or go backwards (stride < length)");
    }
    // end = start + (count - 1) * stride + length, without overflowing.
    int64_t span, end;
    if (__builtin_mul_overflow(r.count - 1, r.stride, &span) ||
        __builtin_add_overflow(r.start, span, &end) ||
        __builtin_add_overflow(end, r.length, &end) || end > numel) {
      return bad(absl::StrCat("reaches past the tensor's ", numel, " elements"));
    }
  }
  return absl::OkStatus();
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string FormatShape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

void RunsToProto(const std::vector<IndexRun>& runs,
                 google::protobuf::RepeatedPtrField<RunRecord>* out) {
  out->Clear();
  for (const IndexRun& run : runs) {
    RunRecord* r = out->Add();
    r->set_start(run.start);
    r->set_length(run.length);
    // Plain runs leave count and stride at their defaults: smaller manifests.
    if (run.count != 1) {
      r->set_count(run.count);
      r->set_stride(run.stride);
    }
  }
}

std::vector<IndexRun> RunsFromProto(const google::protobuf::RepeatedPtrField<RunRecord>& runs) {
  std::vector<IndexRun> out;
  out.reserve(runs.size());
  for (const RunRecord& r : runs) out.push_back({r.start(), r.length(), r.count(), r.stride()});
  return out;
}

}  // namespace conveyor
