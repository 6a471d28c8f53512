#include "model/expert_row_share.h"

#include <cstddef>

namespace conveyor {

RowShare ShareOfRows(const std::vector<int64_t>& expert_begin, int parts, int part) {
  RowShare share;
  share.place.assign(expert_begin.empty() ? 0 : expert_begin.back(), -1);
  share.expert_begin.push_back(0);
  for (size_t e = 0; e + 1 < expert_begin.size(); ++e) {
    const int64_t n = expert_begin[e + 1] - expert_begin[e];
    for (int64_t r = n * part / parts; r < n * (part + 1) / parts; ++r) {
      const int64_t row = expert_begin[e] + r;
      share.place[row] = static_cast<int32_t>(share.rows.size());
      share.rows.push_back(static_cast<int32_t>(row));
    }
    share.expert_begin.push_back(static_cast<int64_t>(share.rows.size()));
  }
  return share;
}

}  // namespace conveyor
