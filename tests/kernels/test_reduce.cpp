// Generated tests for the reductions (kernels/reduce/reduce.h): every op runs on every
// device (cpu, and cuda when built) in f32, f16, bf16 and f64 over samples that
// include rank 0, empty tensors and empty slices, odd lengths (warp-per-row,
// block-per-row and two-pass CUDA paths; rows of 50,257 and 65,536), middle
// and multiple dims, keepdim,
// non-contiguous inputs (copied and copy-free row views) and extreme values
// (NaN, +-inf, +-60000). The reference is an independent double computation on
// the same (already rounded) inputs, rounded once to the output dtype, checked
// with tolerance_for(dtype, OpKind::kReduction).
//
// Documented override: sum and mean are checked against
//   |actual - expected| <= atol + rtol * (|expected| + sum|x| / divisor)
// because the error of any floating-point sum is proportional to sum|x|, and
// cancellation (60000 - 60000 + 0.5) can make |sum| arbitrarily smaller than
// that. Without cancellation (all our random rows) the extra term is small.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/convert_simd.h"
#include "runtime/cpu/threads.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/ops.h"
#include "kernels/reduce/reduce.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

const std::vector<OpId>& reduce_ops() {
  static const std::vector<OpId> ops{OpId::sum, OpId::mean, OpId::max, OpId::min, OpId::norm,
                                     OpId::argmax};
  return ops;
}

struct ReduceSample {
  const char* name;
  Shape shape;
  std::vector<int64_t> dims;  // empty = all
  bool keepdim = false;
  enum Layout { kContiguous, kNoncontiguous, kColumnSlice } layout = kContiguous;
};

// Shapes chosen to reach each code path: rows < 32 and >= 512 columns (warp vs
// block per row), > 16384 columns with few rows (CUDA two-pass), a column
// slice (rows with a stride, no copy) and transposed layouts (copied).
const std::vector<ReduceSample>& reduce_samples() {
  static const std::vector<ReduceSample> samples{
      {"rank0", {}, {}},
      {"rank0-dim0", {}, {0}, true},
      {"empty-all", {0, 3}, {}},
      {"empty-rows", {0, 3}, {1}},
      {"empty-slice", {0, 3}, {0}, true},
      {"vector-7", {7}, {}},
      {"vector-1029", {1029}, {-1}},
      {"strided-1d", {301}, {0}, false, ReduceSample::kNoncontiguous},
      {"matrix-rows", {5, 6}, {1}},
      {"matrix-cols", {5, 6}, {0}},
      {"matrix-both", {5, 6}, {0, 1}, true},
      {"transposed-rows", {6, 5}, {1}, false, ReduceSample::kNoncontiguous},
      {"transposed-cols", {6, 5}, {-2}, true, ReduceSample::kNoncontiguous},
      {"column-slice", {3, 33}, {1}, false, ReduceSample::kColumnSlice},
      {"rank3-middle", {2, 3, 9}, {1}},
      {"rank3-outer-inner", {2, 3, 9}, {2, 0}},
      // Leading-dim reductions of contiguous tensors: the CPU's column path
      // (reduce_cols), with columns longer than one sum block and more kept
      // elements than one thread chunk.
      {"columns-long", {260, 600}, {0}},
      {"columns-rank3", {150, 3, 5}, {0}, true},
      {"rank3-last-keep", {2, 3, 9}, {-1}, true},
      {"rank3-noncontig", {4, 3, 5}, {0, 2}, false, ReduceSample::kNoncontiguous},
      {"block-rows", {3, 700}, {1}, true},
      {"two-pass", {20000}, {}},
      // Rows of GPT-2's vocabulary (50,257) and of 2^16: long-row launch
      // shapes a real GPU checks (two rows: few enough for the emulator).
      {"vocab-rows", {2, 50257}, {1}},
      {"rows-65536", {2, 65536}, {-1}},
  };
  return samples;
}

Tensor make_sample(const ReduceSample& s, DType dtype, Domain domain, Device device) {
  if (s.layout == ReduceSample::kColumnSlice) {
    Shape wide = s.shape;
    wide.back() += 7;
    Tensor full_x = make_input(wide, dtype, domain, 31).to(device);
    return full_x.slice(-1, 2, 2 + s.shape.back());
  }
  Tensor x = make_input(s.shape, dtype, domain, 29).to(device);
  return s.layout == ReduceSample::kNoncontiguous ? make_noncontiguous(x) : x;
}

// The double reference of one reduction, plus sum|x| / divisor per output
// (the scale of the sum-error override above).
struct Reference {
  Shape shape;
  std::vector<double> values;
  std::vector<double> scale;
};

Reference reference(OpId op, const std::vector<double>& x, const Shape& shape,
                    const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, dims.empty());
  for (int64_t d : dims) {
    if (rank > 0) reduced[d < 0 ? d + rank : d] = true;
  }
  Reference ref;
  int64_t n_out = 1, n_red = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      ref.shape.push_back(shape[d]);
      n_out *= shape[d];
    } else {
      if (keepdim) ref.shape.push_back(1);
      n_red *= shape[d];
    }
  }
  std::vector<double> sum(n_out, 0.0), sum_abs(n_out, 0.0), sum_sq(n_out, 0.0);
  std::vector<double> best_max(n_out, -INFINITY), best_min(n_out, INFINITY);
  std::vector<int64_t> arg(n_out, -1);
  std::vector<double> arg_value(n_out, 0.0);
  std::vector<int64_t> index(rank, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t out_i = 0, red_i = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d]) {
        red_i = red_i * shape[d] + index[d];
      } else {
        out_i = out_i * shape[d] + index[d];
      }
    }
    const double v = x[i];
    sum[out_i] += v;
    sum_abs[out_i] += std::fabs(v);
    sum_sq[out_i] += v * v;
    if (std::isnan(v) || std::isnan(best_max[out_i])) {
      best_max[out_i] = best_min[out_i] = NAN;
    } else {
      best_max[out_i] = std::max(best_max[out_i], v);
      best_min[out_i] = std::min(best_min[out_i], v);
    }
    // argmax: the first NaN, else the first maximum (row-major within the slice).
    const double b = arg_value[out_i];
    if (arg[out_i] < 0 || (!std::isnan(b) && (std::isnan(v) || v > b))) {
      arg_value[out_i] = v;
      arg[out_i] = red_i;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {  // odometer
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  ref.values.resize(n_out);
  ref.scale.assign(n_out, 0.0);
  for (int64_t o = 0; o < n_out; ++o) {
    switch (op) {
      case OpId::sum: ref.values[o] = sum[o]; ref.scale[o] = sum_abs[o]; break;
      case OpId::mean:
        ref.values[o] = sum[o] / static_cast<double>(n_red);
        ref.scale[o] = sum_abs[o] / static_cast<double>(n_red);
        break;
      case OpId::max: ref.values[o] = best_max[o]; break;
      case OpId::min: ref.values[o] = best_min[o]; break;
      case OpId::norm: ref.values[o] = std::sqrt(sum_sq[o]); break;
      default: ref.values[o] = static_cast<double>(arg[o]); break;
    }
  }
  return ref;
}

// compare_values with the sum-error override: expected widened by `scale`.
std::string compare_scaled(const std::vector<double>& actual, const std::vector<double>& expected,
                           const std::vector<double>& scale, Tolerance tol) {
  if (actual.size() != expected.size()) return "size mismatch";
  std::vector<double> within(expected);
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i], a = actual[i];
    if (std::isfinite(e) && std::isfinite(a) &&
        std::fabs(a - e) <= tol.atol + tol.rtol * (std::fabs(e) + scale[i])) {
      within[i] = a;  // accepted under the override
    }
  }
  return compare_values(actual, within, tol);
}

Tensor run_op(OpId op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (op != OpId::argmax) return ops::reduce(op, x, dims, keepdim);
  return ops::argmax(x, dims.empty() ? std::nullopt : std::optional<int64_t>(dims[0]), keepdim);
}

std::string dims_label(const ReduceSample& s) {
  std::ostringstream os;
  os << s.name << " " << shape_to_string(s.shape) << " dims " << shape_to_string(Shape(s.dims.begin(), s.dims.end()))
     << (s.keepdim ? " keepdim" : "");
  return os.str();
}

uint64_t bits_hash(const Tensor& t) {  // exact bit pattern of a tensor, for determinism checks
  const Tensor c = t.cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

TEST_CASE("reductions match the double reference on every device and dtype", "[kernels][reduce]") {
  for (OpId op : reduce_ops()) {
    for (Device device : test_devices()) {
      for (DType dtype : float_dtypes()) {
        for (const ReduceSample& sample : reduce_samples()) {
          if (op == OpId::argmax && sample.dims.size() > 1) continue;  // argmax takes one dim
          for (Domain domain : {Domain::kAny, Domain::kExtreme}) {
            const Tensor x = make_sample(sample, dtype, domain, device);
            INFO(label(device, dtype, std::string(op_name(op)) + " " + dims_label(sample) +
                                          (domain == Domain::kExtreme ? " extreme" : "")));
            const Reference ref = reference(op, values_of(x), x.sizes(), sample.dims, sample.keepdim);
            int64_t slice = 1;
            for (int64_t d = 0; d < x.dim(); ++d) {
              bool in = sample.dims.empty();
              for (int64_t r : sample.dims) in = in || (r < 0 ? r + x.dim() : r) == d;
              if (in) slice *= x.sizes()[d];
            }
            if (slice == 0 && (op == OpId::max || op == OpId::min || op == OpId::argmax)) {
              CHECK_THROWS_WITH(run_op(op, x, sample.dims, sample.keepdim), Catch::Contains("empty slice"));
              continue;
            }
            const Tensor y = run_op(op, x, sample.dims, sample.keepdim);
            CHECK(y.device() == device);
            CHECK(y.sizes() == ref.shape);
            if (op == OpId::argmax) {
              CHECK(y.dtype() == kI64);
              CHECK(values_of(y) == ref.values);
              continue;
            }
            CHECK(y.dtype() == dtype);
            const Tolerance tol = tolerance_for(dtype, OpKind::kReduction);
            CHECK(compare_scaled(values_of(y), round_to(ref.values, dtype), ref.scale, tol) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("reductions: CUDA agrees with the CPU backend", "[kernels][reduce]") {
  if (test_devices().size() < 2) return;
  const Device cuda = test_devices()[1];
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  for (const Case& c : {Case{{37, 45}, {1}}, Case{{8, 1500}, {-1}}, Case{{6, 7, 8}, {0, 2}},
                        Case{{30000}, {}}}) {
    for (DType dtype : float_dtypes()) {
      const Tensor x = make_input(c.shape, dtype, Domain::kAny, 7);
      for (OpId op : reduce_ops()) {
        if (op == OpId::argmax && c.dims.size() > 1) continue;
        INFO(std::string(op_name(op)) + " " + std::string(dtype_name(dtype)) + " " + shape_to_string(c.shape));
        const Tensor on_cpu = run_op(op, x, c.dims, false);
        const Tensor on_cuda = run_op(op, x.to(cuda), c.dims, false);
        if (op == OpId::max || op == OpId::min || op == OpId::argmax) {
          CHECK(values_of(on_cuda) == values_of(on_cpu));  // order-independent: exact
        } else {
          CHECK(compare_values(values_of(on_cuda), values_of(on_cpu),
                               tolerance_for(dtype, OpKind::kReduction)) == "");
        }
      }
    }
  }
}

TEST_CASE("reductions accumulate fp16 in fp32", "[kernels][reduce][numerics]") {
  for (Device device : test_devices()) {
    INFO(device.str());
    // An fp16 accumulator stalls at 2,048 (2,048 + 1 rounds back to 2,048).
    CHECK(ops::sum(ones({4096}, {.dtype = kF16, .device = device})).item<float>() == 4096.0f);
    CHECK(values_of(ops::sum(ones({2, 4096}, {.dtype = kF16, .device = device}), {1})) ==
          std::vector<double>{4096.0, 4096.0});
    // 100,000 > 65,504: the sum itself does not fit in fp16, the mean does.
    CHECK(ops::mean(ones({100000}, {.dtype = kF16, .device = device})).item<float>() == 1.0f);
    // +32,000 / -32,000 pairs: an fp16 running sum would be fine here, but a
    // pairwise fp16 tree adds 32,000 + 32,000 = inf; the rows must be exactly 0.
    std::vector<double> pairs(8 * 1000);
    for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = (i % 2 == 0) ? 32000.0 : -32000.0;
    const Tensor x = from_vector(pairs, {8, 1000}, {.dtype = kF16}).to(device);
    CHECK(values_of(ops::sum(x, {1})) == std::vector<double>(8, 0.0));
    CHECK(ops::sum(x).item<float>() == 0.0f);
    CHECK(values_of(ops::mean(x, {-1}, true)) == std::vector<double>(8, 0.0));
    // The same in bf16 (fp32 accumulation, so no overflow either).
    CHECK(values_of(ops::sum(x.to(kBF16), {1})) == std::vector<double>(8, 0.0));
  }
}

TEST_CASE("reductions are deterministic run to run", "[kernels][reduce][numerics]") {
  for (Device device : test_devices()) {
    INFO(device.str());
    for (const Shape& shape : {Shape{60000}, Shape{64, 700}}) {
      const Tensor x = make_input(shape, kF32, Domain::kAny, 11).to(device);
      for (OpId op : {OpId::sum, OpId::mean, OpId::norm}) {
        const uint64_t first = bits_hash(ops::reduce(op, x, {-1}));
        for (int run = 0; run < 2; ++run) CHECK(bits_hash(ops::reduce(op, x, {-1})) == first);
      }
      const Tensor h = x.to(kF16);
      CHECK(bits_hash(ops::sum(h)) == bits_hash(ops::sum(h)));
    }
  }
}

// Note [Column reductions on the CPU]: a reduction over the leading dims of a
// contiguous tensor runs without the transposing copy and must give the same
// bits as the row path on the copied rows (same blocks, same tree).
TEST_CASE("CPU column reductions are bit-identical to the row path", "[kernels][reduce][numerics]") {
  for (DType dtype : {kF32, kF16, kBF16, kF64, kI32}) {
    for (const Shape& shape : {Shape{5, 3}, Shape{129, 7}, Shape{700, 1030}, Shape{1200, 3}}) {
      Tensor x = make_input(shape, kF64, Domain::kAny, 41);
      if (is_floating(dtype) && shape[0] > 100) {  // a NaN and an inf in two columns
        x.slice(0, 70, 71).slice(1, 1, 2).fill_(NAN);
        x.slice(0, 90, 91).slice(1, 2, 3).fill_(INFINITY);
      }
      x = (dtype == kI32 ? ops::binary_scalar(OpId::mul, x, 100.0).to(dtype) : x.to(dtype));
      const Tensor rows = x.t().contiguous();  // [cols, rows]: the row path
      std::vector<OpId> ops_here{OpId::sum, OpId::max, OpId::min};
      if (is_floating(dtype)) ops_here.insert(ops_here.end(), {OpId::mean, OpId::norm});
      for (OpId op : ops_here) {
        INFO(dtype << " " << shape_to_string(shape) << " " << op_name(op));
        const Tensor by_cols = ops::reduce(op, x, {0});
        const Tensor by_rows = ops::reduce(op, rows, {1});
        REQUIRE(by_cols.sizes() == by_rows.sizes());
        CHECK(std::memcmp(by_cols.data_ptr(), by_rows.data_ptr(), by_cols.nbytes()) == 0);
      }
    }
  }
  // A rank-3 leading reduction and a sliced (non-contiguous) input agree too.
  const Tensor x3 = make_input({300, 4, 6}, kF32, Domain::kAny, 43);
  CHECK(bits_hash(ops::sum(x3, {0})) ==
        bits_hash(ops::sum(x3.reshape({300, 24}).t().contiguous(), {1}).reshape({4, 6})));
  const Tensor sliced = make_input({400, 20}, kF32, Domain::kAny, 44).slice(1, 3, 15);
  CHECK(bits_hash(ops::mean(sliced, {0})) == bits_hash(ops::mean(sliced.t().contiguous(), {1})));
}

// One long row (a full reduction) is split across the CPU threads along the
// pairwise tree: the same tree, so the same bits as on one thread.
TEST_CASE("a long row's CPU sum splits across threads without changing a bit", "[kernels][reduce][numerics]") {
  const int threads = get_num_threads();
  for (DType dtype : {kF32, kBF16, kF16, kF64}) {
    const Tensor x = make_input({300007}, dtype, Domain::kAny, 61);
    std::vector<uint64_t> one, many;
    set_num_threads(1);
    for (OpId op : {OpId::sum, OpId::mean, OpId::norm}) one.push_back(bits_hash(ops::reduce(op, x)));
    set_num_threads(4);
    for (OpId op : {OpId::sum, OpId::mean, OpId::norm}) many.push_back(bits_hash(ops::reduce(op, x)));
    set_num_threads(threads);
    INFO(dtype);
    CHECK(one == many);
  }
}

// cpu::block_sums (kernels/cpu/convert_simd.h, Note [Eight blocks at once])
// sums eight blocks at once where the CPU has AVX2 + F16C and must give the
// portable block-by-block loop's bits: lengths around the vector (8), block
// (128), eight-block (1,024) and leaf (8,192) sizes, rows and whole tensors
// (a long one split across the threads), a NaN and an inf in two rows.
TEST_CASE("CPU sums: the vector block path gives the portable path's bits", "[kernels][reduce][numerics]") {
  struct CapGuard {  // the process's cap back when the test ends, failed or not
    cpu::VecIsa cap = cpu::cpu_isa_cap();
    ~CapGuard() { cpu::set_cpu_isa_cap(cap); }
  } guard;
  const cpu::VecIsa cap = guard.cap;
  if (std::strcmp(cpu::convert_isa(), "avx2-f16c") != 0 || cap == cpu::VecIsa::sse2) {
    WARN("this process has no vector block sums (" << cpu::convert_isa() << "): both runs take the portable path");
  }
  const std::vector<int64_t> lengths{1, 7, 9, 127, 129, 1023, 1031, 1024 + 7 * 128 + 5, 8192, 8193, 17387, 100003};
  for (DType dtype : {kF32, kF16, kBF16}) {
    for (const int64_t n : lengths) {
      Tensor x = make_input({3, n}, dtype, Domain::kAny, 71);
      if (n > 1000) {
        x.slice(0, 1, 2).slice(1, 500, 501).fill_(NAN);
        x.slice(0, 2, 3).slice(1, 900, 901).fill_(INFINITY);
      }
      for (OpId op : {OpId::sum, OpId::mean, OpId::norm}) {
        for (const std::vector<int64_t>& dims : {std::vector<int64_t>{-1}, std::vector<int64_t>{}}) {
          INFO(dtype << " [3, " << n << "] " << op_name(op) << (dims.empty() ? " all" : " rows"));
          cpu::set_cpu_isa_cap(cpu::VecIsa::sse2);
          const Tensor portable = ops::reduce(op, x, dims);
          cpu::set_cpu_isa_cap(cap);
          const Tensor vector = ops::reduce(op, x, dims);
          REQUIRE(portable.sizes() == vector.sizes());
          CHECK(std::memcmp(portable.data_ptr(), vector.data_ptr(), vector.nbytes()) == 0);
        }
      }
    }
  }
}

// The documented order of the CPU float sums (kernels/reduce/reduce_cpu.cpp,
// "Order"), written out here on its own: blocks of 128 values, lane i % 8
// of a block summed left to right from +0, the lanes folded
// ((0+1)+(2+3))+((4+5)+(6+7)), the block sums combined by a pairwise tree
// whose left half is the first nb / 2 blocks. Everything in float.
float order_block_sum(const float* v, int64_t n, bool square) {
  float lane[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float t = square ? v[i] * v[i] : v[i];
    lane[i % 8] += t;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}
float order_tree(const std::vector<float>& blocks, int64_t first, int64_t nb) {
  if (nb == 1) return blocks[static_cast<size_t>(first)];
  const float left = order_tree(blocks, first, nb / 2);
  return left + order_tree(blocks, first + nb / 2, nb - nb / 2);
}
std::vector<float> order_block_sums(const std::vector<float>& v, int64_t begin, int64_t n, bool square) {
  std::vector<float> blocks;
  for (int64_t b = 0; b < n; b += 128)
    blocks.push_back(order_block_sum(v.data() + begin + b, std::min<int64_t>(128, n - b), square));
  return blocks;
}
// f rounded to dtype (f32, f16 or bf16) and back, as the sums store it.
float rounded_to(DType dtype, float f) {
  if (dtype == kF16) return static_cast<float>(half(f));
  if (dtype == kBF16) return static_cast<float>(bfloat16(f));
  return f;
}
float order_sum(const std::vector<float>& v, int64_t begin, int64_t n, bool square) {
  if (n == 0) return 0.0f;
  const std::vector<float> blocks = order_block_sums(v, begin, n, square);
  return order_tree(blocks, 0, static_cast<int64_t>(blocks.size()));
}

// cpu::block_sums_streams (Note [Streams] in kernels/cpu/convert_simd.cpp):
// up to four arrays of different lengths at once, each stream's block sums
// the documented order's, on the vector path (eight blocks of each stream in
// turn) and the portable one, lengths around the block (128), the eight-block
// group (1,024) and long ones.
TEST_CASE("CPU sums: the block sums of several streams follow the order", "[kernels][reduce][numerics]") {
  struct CapGuard {
    cpu::VecIsa cap = cpu::cpu_isa_cap();
    ~CapGuard() { cpu::set_cpu_isa_cap(cap); }
  } guard;
  const std::vector<int64_t> lengths{0, 1, 127, 128, 129, 1023, 8 * 128 + 5, 1024, 3 * 1024 + 130, 100003};
  for (DType dtype : {kF32, kF16, kBF16}) {
    // One long array; each stream is a piece of it, 8,192 values apart.
    const Tensor x = make_input({12 * 8192 + 100003}, dtype, Domain::kAny, 81);
    const std::vector<float> v = x.to(kF32).to_vector<float>();
    for (size_t first = 0; first < lengths.size(); ++first) {
      for (const int k : {1, 2, 3, 4}) {
        for (const bool square : {false, true}) {
          int64_t n[cpu::kSumStreams], begin[cpu::kSumStreams];
          std::vector<float> out[cpu::kSumStreams];
          float* sums[cpu::kSumStreams];
          for (int j = 0; j < k; ++j) {
            n[j] = lengths[(first + static_cast<size_t>(j) * 3) % lengths.size()];
            begin[j] = (j * 3 + 1) * 8192;
            out[j].assign(static_cast<size_t>((n[j] + 127) / 128 + 1), -1.0f);
            sums[j] = out[j].data();
          }
          for (const bool portable : {false, true}) {
            cpu::set_cpu_isa_cap(portable ? cpu::VecIsa::sse2 : guard.cap);
            if (dtype == kF32) {
              const float* src[cpu::kSumStreams];
              for (int j = 0; j < k; ++j) src[j] = static_cast<const float*>(x.data_ptr()) + begin[j];
              cpu::block_sums_streams_f32(src, n, k, square, sums);
            } else {
              const uint16_t* src[cpu::kSumStreams];
              for (int j = 0; j < k; ++j) src[j] = static_cast<const uint16_t*>(x.data_ptr()) + begin[j];
              (dtype == kF16 ? cpu::block_sums_streams_f16 : cpu::block_sums_streams_bf16)(src, n, k, square, sums);
            }
            cpu::set_cpu_isa_cap(guard.cap);
            for (int j = 0; j < k; ++j) {
              INFO(dtype << " k " << k << " stream " << j << " n " << n[j] << (square ? " squares" : "")
                         << (portable ? " portable" : " vector"));
              std::vector<float> expected = order_block_sums(v, begin[j], n[j], square);
              expected.push_back(-1.0f);  // the float past the last block sum is not written
              CHECK(std::memcmp(out[j].data(), expected.data(), expected.size() * sizeof(float)) == 0);
            }
          }
        }
      }
    }
  }
}

// The row and whole-tensor sums of f32, f16 and bf16 follow the documented
// order bit for bit, rows taken several at a time (streams), runs of rows as
// one stream, or one long row split into subtrees, on 1 and 2 threads,
// vector and portable.
TEST_CASE("CPU sums follow the documented order bit for bit", "[kernels][reduce][numerics]") {
  struct Guard {
    cpu::VecIsa cap = cpu::cpu_isa_cap();
    int threads = get_num_threads();
    ~Guard() {
      cpu::set_cpu_isa_cap(cap);
      set_num_threads(threads);
    }
  } guard;
  for (DType dtype : {kF32, kF16, kBF16}) {
    // Rows of whole blocks (cols % 128 == 0) are summed as runs of rows; a row
    // of over 2^21 values splits into more subtrees than four a thread.
    for (const Shape& shape : {Shape{1, 300007}, Shape{37, 1031}, Shape{9, 9000}, Shape{3, 8 * 128 + 5}, Shape{130, 64},
                               Shape{301, 1024}, Shape{7, 128}, Shape{66, 256}, Shape{1, (int64_t{1} << 21) + 1000}}) {
      const Tensor x = make_input(shape, dtype, Domain::kAny, 83);
      const std::vector<float> v = x.to(kF32).to_vector<float>();
      const int64_t rows = shape[0], cols = shape[1];
      for (const int threads : {1, 2}) {
        for (const bool portable : {false, true}) {
          set_num_threads(threads);
          cpu::set_cpu_isa_cap(portable ? cpu::VecIsa::sse2 : guard.cap);
          const std::vector<float> by_row = ops::sum(x, {-1}).to(kF32).to_vector<float>();
          const std::vector<float> norms = ops::norm(x, {-1}).to(kF32).to_vector<float>();
          const float all = ops::sum(x.reshape({rows * cols})).to(kF32).item<float>();  // one long row
          cpu::set_cpu_isa_cap(guard.cap);
          set_num_threads(guard.threads);
          INFO(dtype << " " << shape_to_string(shape) << " threads " << threads
                     << (portable ? " portable" : " vector"));
          int bad_rows = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const float want = rounded_to(dtype, order_sum(v, r * cols, cols, false));
            const float want_norm = rounded_to(dtype, std::sqrt(order_sum(v, r * cols, cols, true)));
            bad_rows += std::memcmp(&by_row[static_cast<size_t>(r)], &want, 4) != 0 ||
                        std::memcmp(&norms[static_cast<size_t>(r)], &want_norm, 4) != 0;
          }
          CHECK(bad_rows == 0);
          const float want_all = rounded_to(dtype, order_sum(v, 0, rows * cols, false));
          CHECK(std::memcmp(&all, &want_all, 4) == 0);
        }
      }
    }
  }
}

TEST_CASE("reductions propagate NaN and argmax follows torch", "[kernels][reduce]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      INFO(label(device, dtype, "nan"));
      const Tensor x =
          from_vector(std::vector<double>{1, 3, 3, -2, 2, NAN, 5, NAN, 0, 0, -1, 0}, {3, 4}, {.dtype = dtype})
              .to(device);
      const auto nan_row = [](const std::vector<double>& v) { return std::isnan(v[1]) && !std::isnan(v[0]); };
      CHECK(nan_row(values_of(ops::sum(x, {1}))));
      CHECK(nan_row(values_of(ops::max(x, {1}))));
      CHECK(nan_row(values_of(ops::min(x, {1}))));
      CHECK(nan_row(values_of(ops::norm(x, {1}))));
      CHECK(std::isnan(ops::max(x).item<double>()));
      // First maximum on ties (row 0: index 1), first NaN (row 1: index 1), row 2: index 0.
      CHECK(values_of(ops::argmax(x, 1)) == std::vector<double>{1, 1, 0});
      CHECK(ops::argmax(x).item<int64_t>() == 5);  // the first NaN, flattened
      CHECK(values_of(ops::argmax(x, 0, true)) == std::vector<double>{1, 1, 1, 1});
      CHECK(ops::argmax(x, 0, true).sizes() == Shape{1, 4});
      CHECK(ops::argmax(x, std::nullopt, true).sizes() == Shape{1, 1});
    }
  }
}

TEST_CASE("reductions follow the dtype rules", "[kernels][reduce]") {
  for (Device device : test_devices()) {
    INFO(device.str());
    const Tensor ints = from_vector(std::vector<int32_t>{4, -7, 9, 2, 2, 0}, {2, 3}).to(device);
    CHECK(ops::sum(ints).dtype() == kI64);
    CHECK(ops::sum(ints).item<int64_t>() == 10);
    CHECK(values_of(ops::sum(ints, {0})) == std::vector<double>{6, -5, 9});
    CHECK(ops::max(ints).dtype() == kI32);
    CHECK(values_of(ops::max(ints, {1})) == std::vector<double>{9, 2});
    CHECK(values_of(ops::min(ints, {1})) == std::vector<double>{-7, 0});
    CHECK(values_of(ops::argmax(ints, 1)) == std::vector<double>{2, 0});
    const Tensor flags = from_vector(std::vector<double>{1, 0, 1, 1}, {4}, {.dtype = kBool}).to(device);
    CHECK(ops::sum(flags).item<int64_t>() == 3);
    const Tensor big = full({3}, 3'000'000'000.0, {.dtype = kI64, .device = device});
    CHECK(ops::sum(big).item<int64_t>() == 9'000'000'000LL);  // i64 accumulation, exact
    CHECK(ops::mean(full({2}, 1.0, {.dtype = kF64, .device = device})).dtype() == kF64);
  }
}

TEST_CASE("empty reductions: sum 0, mean NaN, max/argmax errors", "[kernels][reduce][errors]") {
  for (Device device : test_devices()) {
    for (DType dtype : float_dtypes()) {
      INFO(label(device, dtype, "empty"));
      const Tensor e = empty({0}, {.dtype = dtype, .device = device});
      CHECK(ops::sum(e).item<double>() == 0.0);
      CHECK(ops::norm(e).item<double>() == 0.0);
      CHECK(std::isnan(ops::mean(e).item<double>()));
      CHECK_THROWS_WITH(ops::max(e), Catch::Contains("max: cannot reduce over an empty slice (input shape [0]"));
      CHECK_THROWS_WITH(ops::min(e), Catch::Contains("min: cannot reduce over an empty slice"));
      CHECK_THROWS_WITH(ops::argmax(e), Catch::Contains("argmax: cannot take the argmax of an empty slice"));
      const Tensor rows = empty({3, 0}, {.dtype = dtype, .device = device});
      CHECK_THROWS_WITH(ops::max(rows, {1}), Catch::Contains("[3, 0]"));
      CHECK(ops::max(rows, {0}).sizes() == Shape{0});  // nothing to reduce over: empty result
      CHECK(values_of(ops::sum(rows, {1})) == std::vector<double>{0, 0, 0});
    }
  }
}

TEST_CASE("reductions reject bad dims and dtypes with clear errors", "[kernels][reduce][errors]") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(ops::sum(x, {2}),
                    Catch::Contains("sum: dim 2 is out of range for a tensor of shape [2, 3] (valid dims: -2 to 1)"));
  CHECK_THROWS_WITH(ops::mean(x, {-3}), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ops::max(x, {1, -1}),
                    Catch::Contains("max: dim 1 appears more than once in dims [1, -1] for shape [2, 3]"));
  CHECK_THROWS_WITH(ops::argmax(x, 5), Catch::Contains("argmax: dim 5 is out of range"));
  CHECK_THROWS_WITH(ops::sum(scalar_tensor(1.0), {1}), Catch::Contains("out of range"));
  const Tensor ints = zeros({4}, {.dtype = kI64});
  CHECK_THROWS_WITH(ops::mean(ints), Catch::Contains("mean of a i64 tensor of shape [4] is not defined"));
  CHECK_THROWS_WITH(ops::mean(ints), Catch::Contains("x.to(hg::kF32)"));
  CHECK_THROWS_WITH(ops::norm(ints), Catch::Contains("norm of a i64 tensor"));
  CHECK_THROWS_WITH(ops::reduce(OpId::add, x), Catch::Contains("not a value reduction"));
}
