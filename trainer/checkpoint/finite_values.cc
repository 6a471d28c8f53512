#include "trainer/checkpoint/finite_values.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace conveyor {

absl::Status CheckLoadedValuesFinite(const float* data, int64_t n, absl::string_view tensor,
                                     absl::string_view checkpoint) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(data[i]) ? 0 : 1;
  if (bad == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint ", checkpoint, ": tensor ", tensor, " holds ", bad, " NaN or infinite value",
      bad == 1 ? "" : "s", " (of the ", n,
      " elements this rank loaded): the run that saved it had diverged; load an earlier "
      "iteration with --ckpt-step"));
}

}  // namespace conveyor
