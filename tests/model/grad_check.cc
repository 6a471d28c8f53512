#include "tests/model/grad_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace conveyor::testing_util {

std::vector<std::string> CheckGradients(const std::function<double()>& loss,
                                        const std::vector<GradTarget>& targets,
                                        const GradCheckOptions& options) {
  std::vector<std::string> problems;
  for (const GradTarget& t : targets) {
    std::vector<int64_t> indices;
    if (t.size <= options.samples_per_target) {
      for (int64_t i = 0; i < t.size; ++i) indices.push_back(i);
    } else {
      indices.push_back(
          std::max_element(t.grads, t.grads + t.size,
                           [](float a, float b) { return std::fabs(a) < std::fabs(b); }) -
          t.grads);
      // Deterministic spread over the tensor.
      for (int k = 1; k < options.samples_per_target; ++k) {
        indices.push_back((k * 7919 + 13) % t.size);
      }
    }
    for (int64_t i : indices) {
      const float saved = t.values[i];
      t.values[i] = saved + options.eps;
      const double plus = loss();
      t.values[i] = saved - options.eps;
      const double minus = loss();
      t.values[i] = saved;
      const double fd = (plus - minus) / (2.0 * options.eps);
      const double analytic = t.grads[i];
      if (std::fabs(fd - analytic) > options.abs_tol + options.rel_tol * std::fabs(analytic)) {
        problems.push_back(absl::StrFormat("%s[%d]: analytic %.6g, finite difference %.6g", t.name,
                                           i, analytic, fd));
      }
    }
  }
  return problems;
}

float MaxAbsGradient(const std::vector<GradTarget>& targets) {
  float m = 0.0f;
  for (const GradTarget& t : targets) {
    for (int64_t i = 0; i < t.size; ++i) m = std::max(m, std::fabs(t.grads[i]));
  }
  return m;
}

std::vector<GradTarget> ParameterTargets(const std::vector<Parameter*>& params,
                                         std::vector<GradTarget> first) {
  for (Parameter* p : params) {
    first.push_back({p->name, p->value.data(), p->grad.data(), p->value.numel()});
  }
  return first;
}

}  // namespace conveyor::testing_util
