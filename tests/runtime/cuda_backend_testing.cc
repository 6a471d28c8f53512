#include "tests/runtime/cuda_backend_testing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "absl/strings/str_join.h"

namespace conveyor::testing_util {

Locator IndexIn(const Shape& shape) {
  return [shape](int64_t index) {
    std::vector<int64_t> coords(shape.size());
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      coords[i] = shape[i] > 0 ? index % shape[i] : 0;
      index = shape[i] > 0 ? index / shape[i] : 0;
    }
    return absl::StrCat("[", absl::StrJoin(coords, ", "), "]");
  };
}

Comparison Compare(const Values& got, const Values& want, const Tolerance& tol,
                   const Locator& locate) {
  Comparison c;
  if (got.size() != want.size()) {
    c.ok = false;
    c.failure = absl::StrCat("size ", got.size(), " != expected ", want.size());
    c.summary = c.failure;
    return c;
  }
  double max_want = 0.0, diff_sq = 0.0, want_sq = 0.0;
  for (const float w : want) {
    if (std::isfinite(w)) max_want = std::max(max_want, std::fabs(static_cast<double>(w)));
  }
  int64_t max_abs_at = -1, max_rel_at = -1, first_bad = -1, bad = 0, first_nonfinite = -1,
          nonfinite = 0;
  double max_abs = 0.0, max_rel = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g) && std::isfinite(w)) {
      if (nonfinite++ == 0) first_nonfinite = static_cast<int64_t>(i);
      continue;
    }
    if (!std::isfinite(w)) continue;  // never produced by these tests' references
    const double d = std::fabs(g - w);
    diff_sq += d * d;
    want_sq += w * w;
    if (d > max_abs || max_abs_at < 0) max_abs = d, max_abs_at = static_cast<int64_t>(i);
    const double rel = d / std::max(std::fabs(w), 1e-30);
    if (rel > max_rel && std::fabs(w) > 1e-3 * max_want) {
      max_rel = rel;
      max_rel_at = static_cast<int64_t>(i);
    }
    if (d > tol.elem_rel * std::fabs(w) + tol.elem_abs * max_want) {
      if (bad++ == 0) first_bad = static_cast<int64_t>(i);
    }
  }
  const double norm_rel =
      want_sq > 0.0 ? std::sqrt(diff_sq / want_sq) : std::sqrt(diff_sq);  // all-zero want
  auto at = [&](int64_t i) {
    return absl::StrCat(locate(i), " (got ", got[i], ", want ", want[i], ")");
  };
  c.summary = absl::StrCat("n=", got.size(), " max|want|=", max_want, "; max abs err ", max_abs,
                           max_abs_at >= 0 ? " at " + at(max_abs_at) : "", "; max rel err ",
                           max_rel, max_rel_at >= 0 ? " at " + locate(max_rel_at) : "",
                           "; ||got-want||/||want|| = ", norm_rel, " (limit ", tol.norm_rel, ")");
  std::vector<std::string> why;
  if (nonfinite > 0) {
    why.push_back(
        absl::StrCat(nonfinite, " non-finite outputs (NaN/Inf), first at ", at(first_nonfinite)));
  }
  if (norm_rel > tol.norm_rel) {
    why.push_back(
        absl::StrCat("relative error of the whole output ", norm_rel, " > ", tol.norm_rel));
  }
  if (bad > 0) {
    why.push_back(absl::StrCat(bad, " elements beyond ", tol.elem_rel, " |want| + ", tol.elem_abs,
                               " max|want|, first at ", at(first_bad)));
  }
  c.ok = why.empty();
  c.failure = absl::StrJoin(why, "; ");
  return c;
}

void Check(const std::string& what, const Values& got, const Values& want, const Tolerance& tol,
           const Locator& locate) {
  const Comparison c = Compare(got, want, tol, locate);
  std::printf("[%s] %s: %s\n", c.ok ? "ok  " : "FAIL", what.c_str(), c.summary.c_str());
  std::fflush(stdout);
  if (!c.ok) ADD_FAILURE() << what << ": " << c.failure << "\n  " << c.summary;
}

float RoundTo(DType dtype, float v) {
  return dtype == DType::kFloat32 ? v : ToFloat(ToBFloat16(v));
}

Values Random(int64_t n, uint32_t seed, DType dtype, float scale, float offset) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(offset, scale);
  Values v(n);
  for (float& x : v) x = RoundTo(dtype, normal(rng));
  return v;
}

Tensor HostTensor(const Shape& shape, const Values& v) {
  Tensor t = Tensor::Zeros(shape, MemoryCategory::kOther);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

Tensor DeviceTensor(const Shape& shape, const Values& v, DType dtype) {
  Tensor host = Tensor::Zeros(shape, MemoryCategory::kOther, dtype);
  if (dtype == DType::kFloat32) {
    std::copy(v.begin(), v.end(), host.data());
  } else {
    auto* out = static_cast<BFloat16*>(host.raw());
    for (size_t i = 0; i < v.size(); ++i) out[i] = ToBFloat16(v[i]);
  }
  return host.To(Device::kCuda, MemoryCategory::kOther);
}

Values ValuesOf(const Tensor& t) {
  const Tensor host = t.device() == Device::kCpu ? t : t.To(Device::kCpu, MemoryCategory::kOther);
  Values v(t.numel());
  if (t.dtype() == DType::kFloat32) {
    std::copy(host.data(), host.data() + t.numel(), v.begin());
  } else {
    const auto* in = static_cast<const BFloat16*>(host.raw());
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = ToFloat(in[i]);
  }
  return v;
}

std::string ShapeName(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

}  // namespace conveyor::testing_util
