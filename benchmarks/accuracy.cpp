// The accuracy suite of hg-bench: for each kernel family and 16-bit dtype, the
// largest error in ulps of the output dtype and the share of correctly
// rounded outputs, against an f64 reference computed here on the host (plain
// C++ double math, independent of halfgrad's kernels) from the very same
// 16-bit inputs the kernel read.
//
// Error of one output o against the exact value r (in double):
//   correctly rounded  <=>  o == round_nearest_even_to_dtype(r)   (inf and NaN included)
//   ulps = |o - r| / ulp(r), ulp(r) = the dtype's spacing at |r| (at the largest
//   finite value beyond it; the subnormal spacing near 0); an inf or NaN
//   output where the rounded reference is not the same gives inf.
// Two input sets per family: "normal" (randn-like) and "hard" (large offsets,
// values near the dtype's range, -inf masks, subnormals: whichever apply).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "benchmarks/suites.h"
#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"
#include "kernels/softmax/softmax.h"

namespace hgb {
namespace {

using hg::DType;
using hg::Tensor;
using Vec = std::vector<double>;

struct Format {
  int mant;         // stored mantissa bits
  int emin;         // exponent of the smallest normal
  double max;       // largest finite value
};

Format format_of(DType dt) {
  if (dt == hg::kF16) return {10, -14, 65504.0};
  if (dt == hg::kBF16) return {7, -126, std::ldexp(2.0 - std::ldexp(1.0, -7), 127)};
  return {23, -126, static_cast<double>(std::numeric_limits<float>::max())};
}

double ulp(DType dt, double r) {
  const Format f = format_of(dt);
  const double a = std::min(std::fabs(r), f.max);
  int e = f.emin;
  if (a > 0) {
    int ex = 0;
    (void)std::frexp(a, &ex);  // a = m * 2^ex, m in [0.5, 1)
    e = std::max(ex - 1, f.emin);
  }
  return std::ldexp(1.0, e - f.mant);
}

// Round-to-nearest-even of r in dt, exactly (no double rounding through float).
double round_to(DType dt, double r) {
  if (std::isnan(r) || std::isinf(r) || r == 0) return r;
  if (dt == hg::kF32) return static_cast<double>(static_cast<float>(r));
  const Format f = format_of(dt);
  const double u = ulp(dt, r);
  if (std::fabs(r) >= f.max + u / 2) return std::copysign(HUGE_VAL, r);  // ties at the edge go to inf (even)
  const double q = r / u;  // exact: u is a power of two
  double n = std::nearbyint(q);  // the default rounding mode: ties to even
  return n * u;
}

struct ErrorStats {
  double max_ulps = 0;
  int64_t correct = 0, total = 0;
};

ErrorStats compare(DType out_dtype, const Vec& out, const Vec& ref) {
  ErrorStats s;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = out[i], r = ref[i];
    const double rr = round_to(out_dtype, r);
    ++s.total;
    double e;
    if (std::isnan(r) || std::isnan(o)) {
      e = std::isnan(r) && std::isnan(o) ? 0.0 : HUGE_VAL;
      if (e == 0) ++s.correct;
    } else if (std::isinf(o) || std::isinf(rr)) {
      e = o == rr ? 0.0 : HUGE_VAL;
      if (e == 0) ++s.correct;
    } else {
      if (o == rr) ++s.correct;
      e = std::fabs(o - r) / ulp(out_dtype, r);
    }
    s.max_ulps = std::max(s.max_ulps, e);
  }
  return s;
}

Vec values(const Tensor& t) { return t.to(hg::kF64).cpu().contiguous().to_vector<double>(); }

// The inputs the running workload's kernel read, in order (every tensor that
// make() or the cast family hands to a kernel), for --accuracy-inputs.
std::vector<Tensor>& recorded_inputs() {
  static std::vector<Tensor> inputs;
  return inputs;
}

Tensor record(Tensor t) {
  recorded_inputs().push_back(t);
  return t;
}

// A 16-bit tensor on the bench's device holding `v` rounded to dt.
Tensor make(const Bench& b, const std::vector<float>& v, hg::Shape shape, DType dt) {
  return record(hg::from_vector(v, std::move(shape)).to(dt).to(b.device()));
}

// Writes the recorded inputs of workload `name` to dir/<name>.bin and .json
// (Options::accuracy_inputs); an error if a file cannot be written.
void write_inputs(const std::string& dir, const std::string& name) {
  std::string base = name;
  std::replace(base.begin(), base.end(), '/', '_');
  const std::string bin_path = dir + "/" + base + ".bin", json_path = dir + "/" + base + ".json";
  std::ofstream bin(bin_path, std::ios::binary | std::ios::trunc);
  nlohmann::json manifest = {{"inputs", nlohmann::json::array()}};
  for (const Tensor& t : recorded_inputs()) {
    const std::vector<float> v = t.to(hg::kF32).cpu().contiguous().to_vector<float>();
    bin.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    manifest["inputs"].push_back({{"dtype", dtype_str(t.dtype())}, {"shape", t.sizes()}});
  }
  std::ofstream json(json_path, std::ios::trunc);
  json << manifest.dump() << "\n";
  HG_CHECK(bin && json, "hg-bench: cannot write the accuracy inputs ", bin_path, " / ", json_path);
}

// GELU's references in forms that do not cancel for negative x: 1 + erf(z)
// and 1 + tanh(u) lose everything below their own error even in f64 (at
// x = -8.5, 1 + erf(x / sqrt 2) is 0 in f64 while Phi(x) = 1e-17), which made
// exact tail results look hundreds of bf16 ulps off. Phi(x) = erfc(-x / sqrt 2)
// / 2 and (1 + tanh u) / 2 = 1 / (1 + e^(-2u)) are the same functions.
double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh_ref(double x) {
  return x / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ---- inputs -------------------------------------------------------------------

struct Inputs {
  std::mt19937_64 rng{12345};
  std::vector<float> normal(size_t n, double scale = 1.0) {
    std::normal_distribution<double> d(0.0, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(d(rng));
    return v;
  }
  std::vector<float> uniform(size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(d(rng));
    return v;
  }
};

// Hard elementwise inputs for dt: subnormals, values near the top of the
// range, large magnitudes, zeros and both infinities.
std::vector<float> hard_elementwise(Inputs& in, DType dt, size_t n, double lo, double hi) {
  const Format f = format_of(dt);
  const double tiny = std::ldexp(1.0, f.emin);  // smallest normal
  std::vector<float> v = in.uniform(n, lo, hi);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (size_t i = 0; i < n; i += 4) {
    switch ((i / 4) % 6) {
      case 0: v[i] = static_cast<float>(tiny * u(in.rng) * ((i / 24) % 2 ? -1 : 1)); break;    // subnormal
      case 1: v[i] = static_cast<float>(f.max * (0.9 + 0.1 * u(in.rng)) * ((i / 24) % 2 ? -1 : 1)); break;
      case 2: v[i] = 0.0f; break;
      case 3: v[i] = static_cast<float>(tiny * (1 + 64 * u(in.rng))); break;                  // small normals
      case 4: v[i] = (i / 24) % 2 ? -HUGE_VALF : HUGE_VALF; break;
      default: break;
    }
  }
  return v;
}

// ---- families -------------------------------------------------------------------

struct Family {
  std::string name;
  // Runs the kernel on inputs of dt (hard or not); returns {output dtype, out, ref}.
  std::function<void(Bench&, DType, bool hard, DType& out_dt, Vec& out, Vec& ref)> run;
};

Family unary_family(const std::string& name, hg::OpId op, double (*f)(double), double lo, double hi) {
  return {name, [=](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
            Inputs in;
            const size_t n = 8192;
            Tensor x = make(b, hard ? hard_elementwise(in, dt, n, lo, hi) : in.normal(n, 2.0), {int64_t(n)}, dt);
            odt = dt;
            out = values(hg::ops::unary(op, x));
            ref = values(x);
            for (auto& r : ref) r = f(r);
          }};
}

Family binary_family(const std::string& name, hg::OpId op, double (*f)(double, double)) {
  return {name, [=](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
            Inputs in;
            const size_t n = 8192;
            const double big = format_of(dt).max;
            Tensor x = make(b, hard ? hard_elementwise(in, dt, n, -big, big) : in.normal(n), {int64_t(n)}, dt);
            Tensor y = make(b, hard ? hard_elementwise(in, dt, n, -big, big) : in.normal(n), {int64_t(n)}, dt);
            odt = dt;
            out = values(hg::ops::binary(op, x, y));
            const Vec a = values(x), c = values(y);
            ref.resize(n);
            for (size_t i = 0; i < n; ++i) ref[i] = f(a[i], c[i]);
          }};
}

// Row-wise families on [rows, cols]; hard rows: a large offset (+1000 in
// bf16/f16's range), values near the range, and -inf masks over half the row.
std::vector<float> row_inputs(Inputs& in, DType dt, bool hard, int64_t rows, int64_t cols) {
  std::vector<float> v = in.normal(static_cast<size_t>(rows * cols), 3.0);
  if (!hard) return v;
  const double big = std::min(format_of(dt).max * 0.9, 60000.0);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = v.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      switch (r % 4) {
        case 0: row[c] += 1000.0f; break;
        case 1: row[c] = static_cast<float>(big * (c % 2 ? -1 : 1) * (0.5 + 0.5 * (c % 7) / 7.0)); break;
        case 2: if (c % 2 == 0) row[c] = -HUGE_VALF; break;
        default: row[c] *= 1e-3f; break;
      }
    }
  }
  return v;
}

void softmax_ref(const Vec& x, int64_t rows, int64_t cols, bool log, Vec& out) {
  out.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* a = x.data() + r * cols;
    double m = -HUGE_VAL;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, a[c]);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(a[c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      out[static_cast<size_t>(r * cols + c)] = log ? (a[c] - m) - std::log(s) : std::exp(a[c] - m) / s;
    }
  }
}

std::vector<Family> families() {
  std::vector<Family> f;
  f.push_back({"cast-from-f32", [](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
                 Inputs in;
                 const size_t n = 8192;
                 std::vector<float> v = hard ? hard_elementwise(in, dt, n, -format_of(dt).max * 1.1,
                                                                format_of(dt).max * 1.1)
                                             : in.normal(n);
                 Tensor x = record(hg::from_vector(v, {int64_t(n)}).to(b.device()));
                 odt = dt;
                 out = values(x.to(dt));
                 ref = values(x);
               }});
  f.push_back(binary_family("add", hg::OpId::add, [](double a, double c) { return a + c; }));
  f.push_back(binary_family("mul", hg::OpId::mul, [](double a, double c) { return a * c; }));
  f.push_back(unary_family("exp", hg::OpId::exp, [](double x) { return std::exp(x); }, -20.0, 12.0));
  f.push_back(unary_family("log", hg::OpId::log, [](double x) { return std::log(x); }, 0.0, 100.0));
  f.push_back(unary_family("tanh", hg::OpId::tanh, [](double x) { return std::tanh(x); }, -10.0, 10.0));
  f.push_back(unary_family("sigmoid", hg::OpId::sigmoid, sigmoid_ref, -20.0, 20.0));
  f.push_back(unary_family("gelu", hg::OpId::gelu, gelu_ref, -10.0, 10.0));
  f.push_back(unary_family("gelu_tanh", hg::OpId::gelu_tanh, gelu_tanh_ref, -10.0, 10.0));
  f.push_back(unary_family("silu", hg::OpId::silu, [](double x) { return x * sigmoid_ref(x); }, -20.0, 20.0));
  for (const char* opname : {"softmax", "log_softmax"}) {
    const bool log = std::string(opname) == "log_softmax";
    f.push_back({opname, [log](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
                   Inputs in;
                   const int64_t rows = 32, cols = 1024;
                   Tensor x = make(b, row_inputs(in, dt, hard, rows, cols), {rows, cols}, dt);
                   odt = dt;
                   out = values(log ? hg::ops::log_softmax(x) : hg::ops::softmax(x));
                   softmax_ref(values(x), rows, cols, log, ref);
                 }});
  }
  f.push_back({"cross_entropy", [](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
                 // One loss per row (rank-0 calls), so there are 32 outputs to
                 // compare; the loss is f32 for 16-bit logits.
                 Inputs in;
                 const int64_t rows = 32, cols = 1024;
                 std::vector<float> v = row_inputs(in, dt, hard, rows, cols);
                 if (hard) {  // a target the -inf mask hides would be an infinite loss: keep targets finite
                   for (int64_t r = 0; r < rows; ++r) v[static_cast<size_t>(r * cols + 1)] = 5.0f;
                 }
                 Tensor x = make(b, v, {rows, cols}, dt);
                 const Vec xv = values(x);
                 Vec logp;
                 softmax_ref(xv, rows, cols, true, logp);
                 odt = hg::kF32;
                 out.clear();
                 ref.clear();
                 for (int64_t r = 0; r < rows; ++r) {
                   const int64_t t = 1;
                   Tensor target = hg::from_vector(std::vector<int64_t>{t}, {1}).to(b.device());
                   out.push_back(values(hg::ops::cross_entropy(x.narrow(0, r, 1), target))[0]);
                   ref.push_back(-logp[static_cast<size_t>(r * cols + t)]);
                 }
               }});
  for (const char* opname : {"sum", "mean", "norm"}) {
    const std::string op = opname;
    f.push_back({"reduce-" + op, [op](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
                   Inputs in;
                   const int64_t rows = 64, cols = 4096;
                   std::vector<float> v = in.normal(static_cast<size_t>(rows * cols));
                   if (hard) {  // large offsets that cancel: +-32000 pairs (f16's range), then an offset
                     for (int64_t r = 0; r < rows; ++r) {
                       for (int64_t c = 0; c < cols; ++c) {
                         float& e = v[static_cast<size_t>(r * cols + c)];
                         e = r % 2 ? (c % 2 ? 32000.0f : -32000.0f) + e : 100.0f + e;
                       }
                     }
                   }
                   Tensor x = make(b, v, {rows, cols}, dt);
                   const Vec xv = values(x);
                   const hg::OpId id = op == "sum" ? hg::OpId::sum : op == "mean" ? hg::OpId::mean : hg::OpId::norm;
                   odt = dt;
                   out = values(hg::ops::reduce(id, x, {-1}));
                   ref.assign(static_cast<size_t>(rows), 0.0);
                   for (int64_t r = 0; r < rows; ++r) {
                     double s = 0;
                     for (int64_t c = 0; c < cols; ++c) {
                       const double e = xv[static_cast<size_t>(r * cols + c)];
                       s += op == "norm" ? e * e : e;
                     }
                     ref[static_cast<size_t>(r)] = op == "sum" ? s : op == "mean" ? s / cols : std::sqrt(s);
                   }
                 }});
  }
  f.push_back({"matmul", [](Bench& b, DType dt, bool hard, DType& odt, Vec& out, Vec& ref) {
                 Inputs in;
                 const int64_t m = 64, k = 512, n = 64;
                 std::vector<float> av = in.normal(static_cast<size_t>(m * k)), bv = in.normal(static_cast<size_t>(k * n));
                 if (hard) {  // a large common offset: big partial sums that cancel to small results
                   for (size_t i = 0; i < av.size(); ++i) av[i] = (i % 2 ? 100.0f : -100.0f) + av[i];
                 }
                 Tensor a = make(b, av, {m, k}, dt), c = make(b, bv, {k, n}, dt);
                 const Vec x = values(a), y = values(c);
                 odt = dt;
                 out = values(hg::ops::matmul(a, c));
                 ref.assign(static_cast<size_t>(m * n), 0.0);
                 for (int64_t i = 0; i < m; ++i) {
                   for (int64_t j = 0; j < n; ++j) {
                     double s = 0;
                     for (int64_t p = 0; p < k; ++p) s += x[static_cast<size_t>(i * k + p)] * y[static_cast<size_t>(p * n + j)];
                     ref[static_cast<size_t>(i * n + j)] = s;
                   }
                 }
               }});
  return f;
}

}  // namespace

void add_accuracy(Bench& b, std::vector<Workload>& out) {
  (void)b;
  for (const Family& fam : families()) {
    for (DType dt : {hg::kF16, hg::kBF16}) {
      for (bool hard : {false, true}) {
        const std::string set = hard ? "hard" : "normal";
        out.push_back({"accuracy", "accuracy/" + fam.name + "/" + dtype_str(dt) + "/" + set,
                       {{"kind", "accuracy"}, {"family", fam.name}, {"dtype", dtype_str(dt)}, {"inputs", set}},
                       [fam, dt, hard](Bench& bb, const Workload& self) {
                         hg::NoGradGuard no_grad;
                         DType odt = dt;
                         Vec o, r;
                         recorded_inputs().clear();
                         fam.run(bb, dt, hard, odt, o, r);
                         if (!bb.options().accuracy_inputs.empty())
                           write_inputs(bb.options().accuracy_inputs, self.name);
                         const ErrorStats s = compare(odt, o, r);
                         const double share = s.total ? static_cast<double>(s.correct) / s.total : 0.0;
                         char text[160];
                         std::snprintf(text, sizeof text, "max %s ulp (%s)  %.2f%% correctly rounded  (%lld outputs)",
                                       std::isinf(s.max_ulps) ? "inf" : std::to_string(s.max_ulps).substr(0, 8).c_str(),
                                       dtype_str(odt).c_str(), 100.0 * share, static_cast<long long>(s.total));
                         nlohmann::json m = {{"max_ulps", std::isinf(s.max_ulps) ? nlohmann::json("inf")
                                                                                 : nlohmann::json(s.max_ulps)},
                                             {"correctly_rounded", share},
                                             {"outputs", s.total},
                                             {"output_dtype", dtype_str(odt)}};
                         bb.emit_note(self, text, m);
                       }});
      }
    }
  }
}

}  // namespace hgb
