// Central finite differences against analytic gradients, for the gradient tests.
//
// Why these tolerances: the model computes in fp32, so one loss evaluation carries a
// rounding error of roughly 1e-6 (a few ulps of a loss near 1..10, grown by long
// sums). With step eps = 1e-2 the central difference (L(x+eps) - L(x-eps)) / 2eps then
// carries ~1e-6 / 1e-2 = 1e-4 of rounding noise, and its truncation error is
// eps^2 / 6 * L''' ~ 2e-5 for the O(1) third derivatives of these small models. So an
// element agrees when |fd - analytic| <= 3e-4 + 2e-2 * |analytic|. A wrong gradient
// (a missing term, a transposed GEMM, a dropped residual) is off by O(|analytic|),
// far outside that band, which the tests check by asserting the gradients are not
// tiny.
#ifndef CONVEYOR_TESTS_MODEL_GRAD_CHECK_H_
#define CONVEYOR_TESTS_MODEL_GRAD_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/parameter.h"

namespace conveyor::testing_util {

struct GradTarget {
  std::string name;
  float* values;       // perturbed in place (restored afterwards)
  const float* grads;  // analytic d(loss)/d(values)
  int64_t size;
};

struct GradCheckOptions {
  float eps = 1e-2f;
  float abs_tol = 3e-4f;
  float rel_tol = 2e-2f;
  int samples_per_target = 6;  // elements checked per target (all if size is smaller)
};

// Checks `samples_per_target` elements of every target (the largest-gradient one among
// them, so a check never only sees zeros) and returns one line per mismatch.
std::vector<std::string> CheckGradients(const std::function<double()>& loss,
                                        const std::vector<GradTarget>& targets,
                                        const GradCheckOptions& options = {});

// `first` (e.g. the input's target), then each of `params`: its values and gradient.
std::vector<GradTarget> ParameterTargets(const std::vector<Parameter*>& params,
                                         std::vector<GradTarget> first = {});

// Largest |grad| over all targets: a test asserts it is not negligible.
float MaxAbsGradient(const std::vector<GradTarget>& targets);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_MODEL_GRAD_CHECK_H_
