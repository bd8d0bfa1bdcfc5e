// The one tolerance table for comparing a computed tensor with a reference.
//
// A value passes when |actual - expected| <= atol + rtol * |expected|, NaN
// matches NaN, and infinities must match exactly. The rows come from the
// dtype's rounding error (half an ulp: 2^-11 for f16, 2^-8 for bf16, 2^-24 for
// f32) plus room for a few ulp of libm error; GEMM and reductions get a wider
// atol in f16 because cancellation makes small results absolutely, not
// relatively, accurate. Per-op overrides live next to the op's test entry with
// a comment saying why; never loosen a row to make a test pass.
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace hg::test {

enum class OpKind { kElementwise, kReduction };  // kReduction: GEMM, sums, norms, softmax rows

struct Tolerance {
  double rtol;
  double atol;
};

inline Tolerance tolerance_for(DType dtype, OpKind kind) {
  switch (dtype) {
    case DType::F64: return {1e-12, 1e-12};
    case DType::F32: return {1.3e-6, 1e-5};
    case DType::F16: return kind == OpKind::kElementwise ? Tolerance{1e-3, 1e-5} : Tolerance{1e-3, 1e-3};
    case DType::BF16: return kind == OpKind::kElementwise ? Tolerance{1.6e-2, 1e-5} : Tolerance{1.6e-2, 1e-3};
    default: return {0.0, 0.0};  // integers and bool: exact
  }
}

// f64 against a central-difference derivative (h = 1e-6 * max(1, |x|)): the
// difference carries ~eps * |f| / h ~ 1e-10 relative rounding error and
// h^2 |f'''| / 6 ~ 1e-13 truncation error, so 1e-7 keeps three orders of margin
// while a wrong formula (off by O(1)) still fails. Only for numeric-derivative
// references; a closed-form reference (tanh, sigmoid, relu backward) uses
// tolerance_for(kF64, ...), the f64 row.
inline constexpr Tolerance kNumericDerivativeF64{1e-7, 1e-8};

// Empty string when every element is close; otherwise a report of the first
// few mismatches (index, actual, expected) for the test log.
inline std::string compare_values(const std::vector<double>& actual,
                                  const std::vector<double>& expected, Tolerance tol) {
  if (actual.size() != expected.size()) {
    return "size mismatch: " + std::to_string(actual.size()) + " vs " +
           std::to_string(expected.size());
  }
  std::ostringstream report;
  int shown = 0;
  size_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    bool ok;
    if (std::isnan(e)) {
      ok = std::isnan(a);
    } else if (std::isinf(e)) {
      ok = a == e;
    } else {
      ok = std::isfinite(a) && std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
    }
    if (!ok) {
      ++bad;
      if (shown++ < 5) {
        report.precision(10);
        report << "  [" << i << "] got " << a << " expected " << e << "\n";
      }
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(actual.size()) +
         " values outside rtol " + std::to_string(tol.rtol) + " atol " +
         std::to_string(tol.atol) + ":\n" + report.str();
}

}  // namespace hg::test
