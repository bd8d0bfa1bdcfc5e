// cuda-emu: the WMMA API of runtime/emu/include/mma.h (Note [Emulated WMMA
// fragments]) against a reference GEMM in double, for half and bf16 inputs,
// every A/B layout and both accumulator memory layouts; a warp of a 2-warp
// block computes one 16x16 tile, so lanes and warps must not mix.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "tests/emu/emu_test_util.h"

using hg::emu::test::DeviceBuffer;
namespace wmma = nvcuda::wmma;

namespace {

// Warp w: D_w = A_w B_w + C_w, with A, B, C, D given per warp (256 elements
// each); C is loaded and D stored with `layout`; acc_twice adds the product
// twice (an accumulate chain).
template <typename T, typename LA, typename LB>
__global__ void wmma_kernel(const T* a, const T* b, const float* c, float* d, bool col_major_acc) {
  const int w = static_cast<int>(threadIdx.x) / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  const wmma::layout_t layout = col_major_acc ? wmma::mem_col_major : wmma::mem_row_major;
  wmma::load_matrix_sync(fa, a + w * 256, 16);
  wmma::load_matrix_sync(fb, b + w * 256, 16);
  wmma::load_matrix_sync(fc, c + w * 256, 16, layout);
  wmma::mma_sync(fc, fa, fb, fc);
  for (int i = 0; i < fc.num_elements; ++i) fc.x[i] *= 2.0f;  // element-wise: any mapping
  wmma::store_matrix_sync(d + w * 256, fc, 16, layout);
}

// fill_fragment and a store with a leading dimension wider than the tile.
__global__ void fill_kernel(float* d) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
  wmma::fill_fragment(f, 1.5f);
  wmma::store_matrix_sync(d + 16, f, 48, wmma::mem_row_major);
}

template <typename T, typename LA, typename LB>
void check_wmma(const char* name) {
  constexpr bool kAColMajor = std::is_same_v<LA, wmma::col_major>;
  constexpr bool kBColMajor = std::is_same_v<LB, wmma::col_major>;
  for (bool col_acc : {false, true}) {
    INFO(name << (col_acc ? " mem_col_major" : " mem_row_major"));
    std::vector<T> a(512), b(512);
    std::vector<float> c(512);
    std::vector<double> av(512), bv(512);
    for (int i = 0; i < 512; ++i) {
      a[i] = T(static_cast<float>((i * 37) % 23 - 11) / 8.0f);
      b[i] = T(static_cast<float>((i * 53) % 19 - 9) / 4.0f);
      av[i] = static_cast<float>(a[i]);
      bv[i] = static_cast<float>(b[i]);
      c[i] = static_cast<float>(i % 7) - 3.0f;
    }
    DeviceBuffer<T> da(a), db(b);
    DeviceBuffer<float> dc(c), dd(512);
    HG_LAUNCH((wmma_kernel<T, LA, LB>), dim3(1), dim3(64), 0, nullptr, da.get(), db.get(), dc.get(), dd.get(), col_acc);
    const std::vector<float> d = dd.download();
    for (int w = 0; w < 2; ++w) {
      for (int r = 0; r < 16; ++r) {
        for (int col = 0; col < 16; ++col) {
          double ref = c[w * 256 + (col_acc ? col * 16 + r : r * 16 + col)];
          for (int kk = 0; kk < 16; ++kk) {
            const double x = av[w * 256 + (kAColMajor ? kk * 16 + r : r * 16 + kk)];
            const double y = bv[w * 256 + (kBColMajor ? col * 16 + kk : kk * 16 + col)];
            ref += x * y;
          }
          const float got = d[w * 256 + (col_acc ? col * 16 + r : r * 16 + col)];
          INFO("warp " << w << " row " << r << " col " << col);
          // exact: products of these short mantissas and their sums are exact in fp32
          REQUIRE(static_cast<double>(got) == 2.0 * ref);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("emu: wmma m16n16k16 load/mma/store against a reference GEMM", "[emu][wmma]") {
  check_wmma<__half, wmma::row_major, wmma::row_major>("half row/row");
  check_wmma<__half, wmma::row_major, wmma::col_major>("half row/col");
  check_wmma<__half, wmma::col_major, wmma::row_major>("half col/row");
  check_wmma<__half, wmma::col_major, wmma::col_major>("half col/col");
  check_wmma<__nv_bfloat16, wmma::row_major, wmma::row_major>("bf16 row/row");
  check_wmma<__nv_bfloat16, wmma::row_major, wmma::col_major>("bf16 row/col");
  check_wmma<__nv_bfloat16, wmma::col_major, wmma::row_major>("bf16 col/row");
  check_wmma<__nv_bfloat16, wmma::col_major, wmma::col_major>("bf16 col/col");
}

TEST_CASE("emu: wmma fill_fragment and a strided store", "[emu][wmma]") {
  DeviceBuffer<float> d(std::vector<float>(16 * 48, -7.0f));
  HG_LAUNCH(fill_kernel, dim3(1), dim3(32), 0, nullptr, d.get());
  const std::vector<float> h = d.download();
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 48; ++c) {
      INFO("row " << r << " col " << c);
      REQUIRE(h[r * 48 + c] == (c >= 16 && c < 32 ? 1.5f : -7.0f));
    }
  }
}
