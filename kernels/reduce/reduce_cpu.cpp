// CPU reference kernels for the row reductions (kernels/reduce/reduce.h): sum, mean,
// max, min, norm and argmax over each row of a [rows, cols] view with dense
// rows. The numerical oracle for kernels/reduce/reduce.cu.
//
// Formula     out[r] = op(x[r, 0..cols))
// Split       rows in parallel (OpenMP, static schedule) when the tensor is
//             large; each row is reduced by one thread; f32 and 16-bit sums
//             read up to four streams at once (Note [Streams] in
//             kernels/cpu/convert_simd.cpp): the rows in four bands, a run
//             of consecutive rows of each band at a time when the rows are
//             dense whole blocks, else rows g, g + G, g + 2G, g + 3G
//             together; one long row splits into subtrees (at least four a
//             thread, at most 2^20 values each) that serve as the streams
// Order       sums (sum, mean, norm) are blocked pairwise: consecutive blocks
//             of kSumBlock elements, element i of a block into lane i % 8,
//             each lane summed left to right (8 independent chains: they
//             vectorise), the lanes combined by a fixed tree, and block sums
//             combined by recursive halving, so the error grows like
//             (kSumBlock / 8 + 3 + log2(cols / kSumBlock)) * eps instead of
//             cols * eps; one long row splits its tree across the threads
//             (same tree, same result); f32 and 16-bit blocks are summed by
//             cpu::block_sums_streams (kernels/cpu/convert_simd.h), eight
//             blocks at a time in AVX2 registers where the CPU has them, the
//             same lanes and trees, the same bits as the portable loop, on
//             any thread count (tests "CPU sums follow the documented order
//             bit for bit" and "... the block sums of several streams ...");
//             max/min/argmax scan left to right (their result does not depend
//             on the order)
// Bytes       each element read once; one write per row
// Precision   16-bit and f32 values widened to float (exactly), f64 stays double,
//             integer sums in i64; one rounding to the output dtype on store
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>
#include <algorithm>

#include "kernels/cpu/convert_simd.h"
#include "kernels/cpu/loops.h"
#include "runtime/cpu/threads.h"
#include "kernels/reduce/reduce.h"

namespace hg::cpu {

namespace {

// Elements summed in one block before pairwise combining takes over
// (cpu::kSumBlock = 128, kernels/cpu/convert_simd.h), and the interleaved
// accumulators (lanes) of a block.
constexpr int64_t kLanes = 8;

// What a row accumulates in: float for f32/f16/bf16, double for f64, i64 for
// integers and bool.
template <typename T>
using row_acc_t = std::conditional_t<std::is_same_v<T, double>, double,
                                     std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

// The lanes of a block (lane l at lane[l * stride]), combined by a fixed
// tree: ((0+1)+(2+3))+((4+5)+(6+7)).
template <typename A>
A combine_lanes(const A* lane, int64_t stride = 1) {
  const auto l = [&](int64_t i) { return lane[i * stride]; };
  return ((l(0) + l(1)) + (l(2) + l(3))) + ((l(4) + l(5)) + (l(6) + l(7)));
}

// Where the pairwise tree splits n > kSumBlock elements: at a block boundary,
// so the blocks are the same whatever the depth.
int64_t tree_split(int64_t n) { return ((n + kSumBlock - 1) / kSumBlock / 2) * kSumBlock; }

// The per-element functions of the sums: v (sum, mean) and v * v (norm).
struct Same {
  static constexpr bool kSquare = false;
  template <typename A>
  A operator()(A a) const {
    return a;
  }
};
struct Square {
  static constexpr bool kSquare = true;
  template <typename A>
  A operator()(A a) const {
    return a * a;
  }
};

// One block (n <= kSumBlock) of values v (already widened to A): element i
// goes to lane i % kLanes, each lane summed left to right.
template <typename A, typename Post>
A block_sum(const A* v, int64_t n, Post post) {
  A lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += post(v[i + l]);
  }
  for (; i < n; ++i) lane[i % kLanes] += post(v[i]);
  return combine_lanes(lane);
}

// The pairwise tree over nb >= 1 block sums: the left half the first nb / 2
// blocks (tree_split's split), the right half the rest. Summed in place
// (s is scratch): a subtree of a power-of-two count nb level by level
// (s[i] = s[2i] + s[2i + 1] for i < nb / 2, then for i < nb / 4, ...),
// which is the same tree without a call per node.
float tree_sum_in_place(float* s, int64_t nb) {
  if ((nb & (nb - 1)) == 0) {
    for (int64_t w = nb / 2; w >= 1; w /= 2) {
      for (int64_t i = 0; i < w; ++i) s[i] = s[2 * i] + s[2 * i + 1];
    }
    return s[0];
  }
  const int64_t h = nb / 2;
  const float left = tree_sum_in_place(s, h);
  return left + tree_sum_in_place(s + h, nb - h);
}

// True for the types whose sums run on cpu::block_sums_streams: f32 and the
// 16-bit floats (all accumulate in float).
template <typename T>
constexpr bool kBlockSums = std::is_same_v<T, float> || is_16bit_float_v<T>;

// out[j] = sum over i in [0, n[j]) of post(float(x[j][i])), blocked pairwise
// (see Order above), for k <= kSumStreams arrays at once: their block sums
// by cpu::block_sums_streams (kernels/cpu/convert_simd.h: the same lanes and
// lane tree, several arrays read in turn, Note [Streams] there), then
// each array's tree over its block sums, the tree of the recursion below:
// the same bits as summing each array alone.
template <typename T, typename Post>
void stream_sums(const T* const* x, const int64_t* n, int k, Post, float* out) {
  thread_local std::vector<float> scratch;  // the block sums, kept between calls
  int64_t nb[kSumStreams], total = 0;
  for (int j = 0; j < k; ++j) total += nb[j] = (n[j] + kSumBlock - 1) / kSumBlock;
  if (static_cast<int64_t>(scratch.size()) < total) scratch.resize(static_cast<size_t>(total));
  float* sums[kSumStreams];
  for (int64_t j = 0, at = 0; j < k; at += nb[j], ++j) sums[j] = scratch.data() + at;
  block_sums_streams<T>(x, n, k, Post::kSquare, sums);
  for (int j = 0; j < k; ++j) out[j] = nb[j] == 0 ? 0.0f : tree_sum_in_place(sums[j], nb[j]);
}

// sum over i in [0, n) of post(A(x[i])), blocked pairwise (see Order above).
template <typename T, typename Post>
row_acc_t<T> pairwise_sum(const T* x, int64_t n, Post post) {
  using A = row_acc_t<T>;
  if constexpr (kBlockSums<T>) {
    float s = 0.0f;
    stream_sums<T>(&x, &n, 1, post, &s);
    return s;
  } else {
    if (n <= kSumBlock) {
      if constexpr (std::is_same_v<T, A>) {
        return block_sum<A>(x, n, post);
      } else {
        A v[kSumBlock];
        for (int64_t i = 0; i < n; ++i) v[i] = static_cast<A>(x[i]);
        return block_sum<A>(v, n, post);
      }
    }
    const int64_t half = tree_split(n);
    return pairwise_sum<T>(x, half, post) + pairwise_sum<T>(x + half, n - half, post);
  }
}

// pairwise_sum of one long row on `threads` threads: the subtrees `depth`
// levels down (a few a thread) are summed in parallel, each thread's
// consecutive subtrees kSumStreams at a time as streams where the type has
// block sums, and combined in the same tree, so the result is bit-identical
// to pairwise_sum's.
template <typename T, typename Post>
row_acc_t<T> pairwise_sum_parallel(const T* x, int64_t n, Post post, int depth, int threads) {
  using A = row_acc_t<T>;
  std::vector<std::pair<int64_t, int64_t>> parts;  // (begin, length) of each subtree
  const auto split = [&](auto&& self, int64_t begin, int64_t len, int d) -> void {
    if (d == 0 || len <= kSumBlock) {
      parts.emplace_back(begin, len);
      return;
    }
    const int64_t half = tree_split(len);
    self(self, begin, half, d - 1);
    self(self, begin + half, len - half, d - 1);
  };
  split(split, 0, n, depth);
  const int64_t np = static_cast<int64_t>(parts.size());
  std::vector<A> sums(parts.size());
  const int64_t pieces = std::min<int64_t>(threads, np);  // one run of consecutive parts a thread
  parallel_for(pieces, pieces > 1, [&](int64_t t) {
    const int64_t first = t * np / pieces, end = (t + 1) * np / pieces;
    for (int64_t p = first; p < end;) {
      if constexpr (kBlockSums<T>) {
        const T* xs[kSumStreams];
        int64_t ns[kSumStreams];
        int k = 0;
        for (; k < kSumStreams && p + k < end; ++k) {
          xs[k] = x + parts[static_cast<size_t>(p + k)].first;
          ns[k] = parts[static_cast<size_t>(p + k)].second;
        }
        stream_sums<T>(xs, ns, k, post, sums.data() + p);
        p += k;
      } else {
        sums[static_cast<size_t>(p)] =
            pairwise_sum<T>(x + parts[static_cast<size_t>(p)].first, parts[static_cast<size_t>(p)].second, post);
        ++p;
      }
    }
  });
  size_t next = 0;
  const auto combine = [&](auto&& self, int64_t len, int d) -> A {
    if (d == 0 || len <= kSumBlock) return sums[next++];
    const int64_t half = tree_split(len);
    const A left = self(self, half, d - 1);
    return left + self(self, len - half, d - 1);
  };
  return combine(combine, n, depth);
}

// The float sums of every row (f32 and 16-bit, kBlockSums) to acc[rows]:
// rows are taken kSumStreams at a time as streams (Note [Streams] in
// kernels/cpu/convert_simd.cpp), rows g, g + groups, g + 2 * groups, ...
// together, so that each thread's streams are far apart; one long row splits
// its tree into subtrees that serve as the streams.
template <typename T, typename Post>
void float_row_sums(const Tensor& x, Post post, float* acc) {
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  const int64_t row_stride = x.strides()[0];
  const T* base = static_cast<const T*>(x.data_ptr());
  const int threads = get_num_threads();
  if (rows == 1 && cols >= 4 * kParallelGrain) {
    // At least kSumStreams subtrees a thread, each of at most kMaxPart
    // values, so that stream_sums' scratch stays small (kMaxPart / 128
    // floats a stream).
    constexpr int64_t kMaxPart = int64_t{1} << 20;
    int depth = 0;
    while ((int64_t{1} << depth) < int64_t{kSumStreams} * threads || (cols >> depth) > kMaxPart) ++depth;
    acc[0] = pairwise_sum_parallel<T>(base, cols, post, depth, threads);
    return;
  }
  const bool parallel = rows > 1 && rows * cols >= kParallelGrain;
  const int64_t k = std::clamp<int64_t>(rows / (parallel ? threads : 1), 1, kSumStreams);
  if (row_stride == cols && cols % kSumBlock == 0 && k > 1) {
    // Dense rows of whole blocks: a run of consecutive rows is one array
    // whose block sums are its rows' block sums in turn, so each stream is
    // a run of rows (the k streams: the rows split in k bands, a batch of
    // each band at a time), and each row's tree runs over its own cols / 128
    // block sums.
    const int64_t band = (rows + k - 1) / k, nbr = cols / kSumBlock;
    const int64_t batch = std::max<int64_t>(1, 65536 / cols);  // rows of a band per call
    const int64_t batches = (band + batch - 1) / batch;
    parallel_for(batches, parallel, [&](int64_t b) {
      const T* xs[kSumStreams];
      int64_t ns[kSumStreams], first[kSumStreams];
      int m = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r0 = j * band + b * batch, r1 = std::min({r0 + batch, (j + 1) * band, rows});
        if (r0 >= r1) continue;
        xs[m] = base + r0 * cols;
        ns[m] = (r1 - r0) * cols;
        first[m++] = r0;
      }
      thread_local std::vector<float> scratch;
      int64_t total = 0;
      for (int j = 0; j < m; ++j) total += ns[j] / kSumBlock;
      if (static_cast<int64_t>(scratch.size()) < total) scratch.resize(static_cast<size_t>(total));
      float* sums[kSumStreams];
      for (int64_t j = 0, at = 0; j < m; at += ns[j] / kSumBlock, ++j) sums[j] = scratch.data() + at;
      block_sums_streams<T>(xs, ns, m, Post::kSquare, sums);
      for (int j = 0; j < m; ++j) {
        for (int64_t r = 0; r < ns[j] / cols; ++r) acc[first[j] + r] = tree_sum_in_place(sums[j] + r * nbr, nbr);
      }
    });
    return;
  }
  const int64_t groups = (rows + k - 1) / k;
  parallel_for(groups, parallel, [&](int64_t g) {
    const T* xs[kSumStreams];
    int64_t ns[kSumStreams];
    int m = 0;
    for (int64_t r = g; m < k && r < rows; r += groups, ++m) {
      xs[m] = base + r * row_stride;
      ns[m] = cols;
    }
    float s[kSumStreams];
    stream_sums<T>(xs, ns, m, post, s);
    for (int j = 0; j < m; ++j) acc[g + j * groups] = s[j];
  });
}

// Runs row_fn(r, row_pointer) for every row, in parallel when it pays.
template <typename T, typename RowFn>
void for_each_row(const Tensor& x, RowFn row_fn) {
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  const int64_t row_stride = x.strides()[0];
  const T* base = static_cast<const T*>(x.data_ptr());
  const bool parallel = rows > 1 && rows * cols >= kParallelGrain;
  parallel_for(rows, parallel, [&](int64_t r) { row_fn(r, base + r * row_stride); });
}

template <typename T>
void reduce_rows_typed(OpId op, const Tensor& out, const Tensor& x) {
  using A = row_acc_t<T>;
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1];
  T* o = static_cast<T*>(out.data_ptr());
  const auto widen = [](T v) { return static_cast<A>(v); };
  const Same same;
  const Square square;
  if constexpr (kBlockSums<T>) {  // the sums of f32 and 16-bit rows, kSumStreams rows at a time
    if (op == OpId::sum || op == OpId::mean || op == OpId::norm) {
      std::vector<float> acc(static_cast<size_t>(rows));
      if (op == OpId::norm) {
        float_row_sums<T>(x, square, acc.data());
      } else {
        float_row_sums<T>(x, same, acc.data());
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float s = acc[static_cast<size_t>(r)];
        // mean: 0 / 0 = NaN for an empty row, like torch
        o[r] = static_cast<T>(op == OpId::sum ? s : op == OpId::mean ? s / static_cast<float>(cols) : std::sqrt(s));
      }
      return;
    }
  }
  // One long row (a full reduction) splits its tree across the threads.
  const int threads = get_num_threads();
  const bool one_long_row = rows == 1 && threads > 1 && cols >= 4 * kParallelGrain;
  int depth = 0;
  while (one_long_row && (1 << depth) < 4 * threads) ++depth;  // a few subtrees a thread
  const auto sum_row = [&](const T* row, auto post) {
    return one_long_row ? pairwise_sum_parallel<T>(row, cols, post, depth, threads) : pairwise_sum<T>(row, cols, post);
  };
  switch (op) {
    case OpId::sum:
      return for_each_row<T>(x, [&](int64_t r, const T* row) { o[r] = static_cast<T>(sum_row(row, same)); });
    case OpId::max:
      return for_each_row<T>(x, [&](int64_t r, const T* row) {
        A best = widen(row[0]);
        for (int64_t c = 1; c < cols; ++c) best = max_nan(best, widen(row[c]));
        o[r] = static_cast<T>(best);
      });
    case OpId::min:
      return for_each_row<T>(x, [&](int64_t r, const T* row) {
        A best = widen(row[0]);
        for (int64_t c = 1; c < cols; ++c) best = min_nan(best, widen(row[c]));
        o[r] = static_cast<T>(best);
      });
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (op) {
      case OpId::mean:  // 0 / 0 = NaN for an empty row, like torch
        return for_each_row<T>(
            x, [&](int64_t r, const T* row) { o[r] = static_cast<T>(sum_row(row, same) / static_cast<A>(cols)); });
      case OpId::norm:
        return for_each_row<T>(
            x, [&](int64_t r, const T* row) { o[r] = static_cast<T>(std::sqrt(sum_row(row, square))); });
      default:
        break;
    }
  }
  HG_FAIL("cpu::reduce_rows: ", op_name(op), " is not a reduction for dtype ", dtype_of<T>());
}

// Note [Column reductions on the CPU]
// A reduction over the leading dims of a contiguous tensor (the bias gradient
// sum over the batch, a mean over dim 0) has x[r, c] at x + r + c * ld: the
// kept index r is the contiguous one. Instead of copying the transpose to
// dense rows, reduce_cols walks the columns in the same order as the row path
// and keeps one accumulator per r, so the inner loop runs along contiguous
// memory and vectorises: the same blocks of kSumBlock, the same kLanes lanes
// and lane tree, and the same block tree (acc = left + right), for every r at
// once.
// Each result is therefore bit-identical to reduce_rows on the copied rows.
// r is split in chunks of kColChunk across threads.
constexpr int64_t kColChunk = 512;

// acc[r] = pairwise_sum over i in [0, n) of post(A(x[r + i * ld])), r in
// [0, nr); scratch holds nr accumulators per remaining tree level, lanes
// kLanes * nr for a block's lanes.
template <typename T, typename Post>
void pairwise_sum_cols(const T* x, int64_t ld, int64_t nr, int64_t n, Post post, row_acc_t<T>* acc,
                       row_acc_t<T>* scratch, row_acc_t<T>* lanes) {
  using A = row_acc_t<T>;
  if (n <= kSumBlock) {
    for (int64_t j = 0; j < kLanes * nr; ++j) lanes[j] = A(0);
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * ld;
      A* lane = lanes + (i % kLanes) * nr;
      for (int64_t r = 0; r < nr; ++r) lane[r] += post(static_cast<A>(xi[r]));
    }
    for (int64_t r = 0; r < nr; ++r) acc[r] = combine_lanes(lanes + r, nr);
    return;
  }
  const int64_t half = tree_split(n);
  pairwise_sum_cols<T>(x, ld, nr, half, post, acc, scratch + nr, lanes);
  pairwise_sum_cols<T>(x + half * ld, ld, nr, n - half, post, scratch, scratch + nr, lanes);
  for (int64_t r = 0; r < nr; ++r) acc[r] += scratch[r];
}

// Levels of pairwise_sum_cols' tree for n elements (scratch rows it needs).
int64_t tree_levels(int64_t n) {
  int64_t levels = 1;
  for (int64_t blocks = (n + kSumBlock - 1) / kSumBlock; blocks > 1; blocks = (blocks + 1) / 2) ++levels;
  return levels;
}

template <typename T>
void reduce_cols_typed(OpId op, const Tensor& out, const Tensor& x) {
  using A = row_acc_t<T>;
  const int64_t rows = x.sizes()[0], cols = x.sizes()[1], ld = x.strides()[1];
  const T* base = static_cast<const T*>(x.data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  const int64_t chunks = (rows + kColChunk - 1) / kColChunk;
  const int64_t levels = tree_levels(cols);
  const bool parallel = chunks > 1 && rows * cols >= kParallelGrain;
  parallel_for(chunks, parallel, [&](int64_t chunk) {
    const int64_t r0 = chunk * kColChunk, nr = std::min(kColChunk, rows - r0);
    const T* x0 = base + r0;
    std::vector<A> acc(static_cast<size_t>(nr * (levels + 1 + kLanes)));
    A* a = acc.data();
    A* lanes = a + nr * (levels + 1);
    switch (op) {
      case OpId::sum:
      case OpId::mean:
        pairwise_sum_cols<T>(
            x0, ld, nr, cols, [](A v) { return v; }, a, a + nr, lanes);
        break;
      case OpId::norm:
        pairwise_sum_cols<T>(
            x0, ld, nr, cols, [](A v) { return v * v; }, a, a + nr, lanes);
        break;
      case OpId::max:
      case OpId::min:
        for (int64_t r = 0; r < nr; ++r) a[r] = static_cast<A>(x0[r]);
        for (int64_t c = 1; c < cols; ++c) {
          const T* xc = x0 + c * ld;
          if (op == OpId::max) {
            for (int64_t r = 0; r < nr; ++r) a[r] = max_nan(a[r], static_cast<A>(xc[r]));
          } else {
            for (int64_t r = 0; r < nr; ++r) a[r] = min_nan(a[r], static_cast<A>(xc[r]));
          }
        }
        break;
      default:
        break;
    }
    for (int64_t r = 0; r < nr; ++r) {
      if constexpr (std::is_floating_point_v<A>) {
        if (op == OpId::mean) {
          o[r0 + r] = static_cast<T>(a[r] / static_cast<A>(cols));
          continue;
        }
        if (op == OpId::norm) {
          o[r0 + r] = static_cast<T>(std::sqrt(a[r]));
          continue;
        }
      }
      o[r0 + r] = static_cast<T>(a[r]);
    }
  });
}

}  // namespace

void reduce_rows(OpId op, const Tensor& out, const Tensor& x) {
  hg::detail::check_reduce_rows_buffers(out, x);
  HG_CHECK(x.sizes()[1] > 0 || (op != OpId::max && op != OpId::min), "empty max/min row");
  if (out.numel() == 0) return;
  dispatch_compute_dtype(x.dtype(), op_name(op), [&](auto tag) { reduce_rows_typed<decltype(tag)>(op, out, x); });
}

void reduce_cols(OpId op, const Tensor& out, const Tensor& x) {
  HG_CHECK(x.dim() == 2 && x.is_cpu() && x.sizes()[0] >= 1 && x.sizes()[1] >= 1 && x.strides()[0] == 1 &&
               x.strides()[1] >= x.sizes()[0],
           "cpu::reduce_cols wants a non-empty [rows, cols] view with dense columns, got ", x.shape_str());
  HG_CHECK(out.is_contiguous() && out.numel() == x.sizes()[0] && out.dtype() == x.dtype(),
           "cpu::reduce_cols: bad output ", out.shape_str());
  HG_CHECK(is_floating(x.dtype()) || op == OpId::sum || op == OpId::max || op == OpId::min,
           "cpu::reduce_cols: ", op_name(op), " is not a reduction for dtype ", x.dtype());
  HG_CHECK(op == OpId::sum || op == OpId::mean || op == OpId::max || op == OpId::min || op == OpId::norm,
           "cpu::reduce_cols: ", op_name(op), " is not a value reduction");
  dispatch_compute_dtype(x.dtype(), op_name(op), [&](auto tag) { reduce_cols_typed<decltype(tag)>(op, out, x); });
}

void argmax_rows(const Tensor& out, const Tensor& x) {
  HG_CHECK(x.dim() == 2 && (x.sizes()[1] <= 1 || x.strides()[1] == 1), "argmax_rows wants dense rows, got ",
            x.shape_str());
  HG_CHECK(out.is_contiguous() && out.dtype() == kI64 && out.numel() == x.sizes()[0],
            "argmax_rows: bad output ", out.shape_str());
  HG_CHECK(x.sizes()[1] > 0, "empty argmax row");
  if (out.numel() == 0) return;
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  const int64_t cols = x.sizes()[1];
  dispatch_compute_dtype(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    using A = row_acc_t<T>;
    for_each_row<T>(x, [&](int64_t r, const T* row) {
      // Strict > keeps the first of equal maxima; the first NaN wins and stops the scan.
      int64_t best_index = 0;
      A best = static_cast<A>(row[0]);
      for (int64_t c = 1; c < cols && best == best; ++c) {
        const A v = static_cast<A>(row[c]);
        if (v != v || v > best) {
          best = v;
          best_index = c;
        }
      }
      o[r] = best_index;
    });
  });
}

}  // namespace hg::cpu
