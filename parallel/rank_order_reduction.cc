#include "parallel/rank_order_reduction.h"

#include <algorithm>

#include "runtime/dtype.h"

namespace conveyor {
namespace {

// How elements of type Wire are combined: in Wide, read with Widen and written back
// with Narrow once every part is in.
template <typename Wire>
struct Arithmetic {
  using Wide = Wire;
  static Wide Widen(Wire x) { return x; }
  static Wire Narrow(Wide x) { return x; }
};
template <>
struct Arithmetic<BFloat16> {
  using Wide = float;
  static float Widen(BFloat16 x) { return ToFloat(x); }
  static BFloat16 Narrow(float x) { return ToBFloat16(x); }
};

template <typename Wire, typename Combine>
void Reduce(const void* parts, int num_parts, int64_t n, void* out, Combine combine) {
  using A = Arithmetic<Wire>;
  const Wire* in = static_cast<const Wire*>(parts);
  Wire* result = static_cast<Wire*>(out);
  for (int64_t i = 0; i < n; ++i) {
    typename A::Wide acc = A::Widen(in[i]);
    for (int r = 1; r < num_parts; ++r) acc = combine(acc, A::Widen(in[r * n + i]));
    result[i] = A::Narrow(acc);
  }
}

template <typename Wire>
void Sum(const void* parts, int num_parts, int64_t n, void* out) {
  Reduce<Wire>(parts, num_parts, n, out, [](auto a, auto b) { return a + b; });
}

}  // namespace

void ReduceInRankOrder(Reduction op, DType type, const void* parts, int num_parts, int64_t n,
                       void* out) {
  if (op == Reduction::kMax) {
    // std::max would drop a NaN depending on its position; a NaN anywhere must win so
    // that every rank sees the overflow and skips the step alike.
    Reduce<double>(parts, num_parts, n, out,
                   [](double a, double b) { return (a != a || b != b) ? a + b : std::max(a, b); });
    return;
  }
  switch (type) {
    case DType::kFloat32:
      return Sum<float>(parts, num_parts, n, out);
    case DType::kBFloat16:
      return Sum<BFloat16>(parts, num_parts, n, out);
    case DType::kFloat64:
      return Sum<double>(parts, num_parts, n, out);
    default:
      return;  // Communicator accepts no other type for a sum
  }
}

}  // namespace conveyor
