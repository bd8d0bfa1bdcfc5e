// cuda-emu: the sm_80 warp-level instructions of kernels/cuda/mma_sm80.cuh
// (Note [Emulated mma.sync and ldmatrix fragments], Note [Emulated cp.async
// groups] in runtime/emu/include/hg_emu_mma_sm80.h) against the PTX ISA's
// documented layouts, written out independently here:
//   - mma.m16n8k16: each lane builds its A, B, C registers from memory by the
//     documented fragment layout and writes D back by it; the result must be
//     the CPU product (a wrong lane/register mapping in the emulator permutes
//     elements and fails this);
//   - ldmatrix .x4 with and without .trans: every lane's four registers
//     against the documented element for every lane, with row addresses in a
//     scrambled order;
//   - ldmatrix feeding mma: a 16x16x16 product from row-major shared tiles;
//   - cp.async: copies complete only at the wait_group that covers their
//     group, zero fill, and uncommitted copies stay pending.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/mma_sm80.cuh"
#include "tests/emu/emu_test_util.h"

using hg::emu::test::DeviceBuffer;
namespace sm80 = hg::cuda::sm80;

namespace {

template <typename T>
__device__ uint32_t reg_of(const T* m, int ld, int r0, int c0, int r1, int c1) {
  uint16_t lo, hi;
  std::memcpy(&lo, m + r0 * ld + c0, 2);
  std::memcpy(&hi, m + r1 * ld + c1, 2);
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Warp w: D_w[16x8] = A_w[16x16] B_w[16x8] + C_w, all row-major in memory;
// fragments placed by the PTX ISA layout.
template <typename T>
__global__ void mma_layout_kernel(const T* a, const T* b, const float* c, float* d) {
  const int w = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const T* aw = a + w * 256;
  const T* bw = b + w * 128;
  uint32_t ra[4], rb[2];
  ra[0] = reg_of(aw, 16, g, 2 * t, g, 2 * t + 1);
  ra[1] = reg_of(aw, 16, g + 8, 2 * t, g + 8, 2 * t + 1);
  ra[2] = reg_of(aw, 16, g, 2 * t + 8, g, 2 * t + 9);
  ra[3] = reg_of(aw, 16, g + 8, 2 * t + 8, g + 8, 2 * t + 9);
  rb[0] = reg_of(bw, 8, 2 * t, g, 2 * t + 1, g);
  rb[1] = reg_of(bw, 8, 2 * t + 8, g, 2 * t + 9, g);
  float acc[4];
  const float* cw = c + w * 128;
  acc[0] = cw[g * 8 + 2 * t];
  acc[1] = cw[g * 8 + 2 * t + 1];
  acc[2] = cw[(g + 8) * 8 + 2 * t];
  acc[3] = cw[(g + 8) * 8 + 2 * t + 1];
  sm80::mma_m16n8k16<T>(acc, ra, rb);
  float* dw = d + w * 128;
  dw[g * 8 + 2 * t] = acc[0];
  dw[g * 8 + 2 * t + 1] = acc[1];
  dw[(g + 8) * 8 + 2 * t] = acc[2];
  dw[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

template <typename T>
void check_mma(const char* name) {
  INFO(name);
  constexpr int kWarps = 2;
  std::vector<T> a(256 * kWarps), b(128 * kWarps);
  std::vector<float> c(128 * kWarps);
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<float>(static_cast<int>((i * 37) % 23) - 11) / 8.0f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<float>(static_cast<int>((i * 53) % 19) - 9) / 4.0f);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  DeviceBuffer<T> da(a), db(b);
  DeviceBuffer<float> dc(c), dd(c.size());
  HG_LAUNCH(mma_layout_kernel<T>, dim3(1), dim3(32 * kWarps), 0, nullptr, da.get(), db.get(), dc.get(), dd.get());
  const std::vector<float> d = dd.download();
  for (int w = 0; w < kWarps; ++w) {
    for (int r = 0; r < 16; ++r) {
      for (int n = 0; n < 8; ++n) {
        double ref = c[w * 128 + r * 8 + n];
        for (int k = 0; k < 16; ++k) {
          ref += static_cast<double>(static_cast<float>(a[w * 256 + r * 16 + k])) *
                 static_cast<double>(static_cast<float>(b[w * 128 + k * 8 + n]));
        }
        INFO("warp " << w << " row " << r << " col " << n);
        // exact: short mantissas, sums exact in fp32
        REQUIRE(static_cast<double>(d[w * 128 + r * 8 + n]) == ref);
      }
    }
  }
}

// Four 8x8 matrices stored in a 32-row, 8-column shared array at rows
// perm[8j + i] (matrix j, row i); lane l passes the address of row l % 8 of
// matrix l / 8. Each lane writes its four registers to out[4 lane + j].
__global__ void ldmatrix_kernel(const uint16_t* src, const int* perm, uint32_t* out, bool trans) {
  __shared__ __align__(16) uint16_t tile[32 * 8];
  const int lane = static_cast<int>(threadIdx.x);
  for (int e = lane; e < 32 * 8; e += 32) tile[e] = src[e];
  __syncwarp();
  uint32_t r[4];
  const uint16_t* row = tile + perm[lane] * 8;
  if (trans) {
    sm80::ldmatrix_x4_trans(r, row);
  } else {
    sm80::ldmatrix_x4(r, row);
  }
  for (int j = 0; j < 4; ++j) out[4 * lane + j] = r[j];
}

// D[16x16] = A[16x16] B[16x16] with A row-major and B either [n][k]
// (b_nk = true: ldmatrix without .trans) or [k][n] (.trans), both in padded
// shared rows (24 elements); the two 8-column halves of D are two mma's.
template <typename T>
__global__ void ldmatrix_mma_kernel(const T* a, const T* b, float* d, bool b_nk) {
  constexpr int kLd = 24;
  __shared__ __align__(16) T sa[16 * kLd];
  __shared__ __align__(16) T sb[16 * kLd];
  const int lane = static_cast<int>(threadIdx.x);
  for (int e = lane; e < 256; e += 32) {
    sa[(e / 16) * kLd + e % 16] = a[e];
    sb[(e / 16) * kLd + e % 16] = b[e];
  }
  __syncwarp();
  const int mi = lane / 8, ri = lane % 8, g = lane / 4, t = lane % 4;
  uint32_t ra[4], rb[4];
  sm80::ldmatrix_x4(ra, sa + ((mi % 2) * 8 + ri) * kLd + (mi / 2) * 8);
  if (b_nk) {  // sb[n][k]: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
    sm80::ldmatrix_x4(rb, sb + ((mi / 2) * 8 + ri) * kLd + (mi % 2) * 8);
  } else {  // sb[k][n]: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
    sm80::ldmatrix_x4_trans(rb, sb + ((mi % 2) * 8 + ri) * kLd + (mi / 2) * 8);
  }
  for (int nt = 0; nt < 2; ++nt) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint32_t bb[2] = {rb[2 * nt], rb[2 * nt + 1]};
    sm80::mma_m16n8k16<T>(acc, ra, bb);
    d[g * 16 + nt * 8 + 2 * t] = acc[0];
    d[g * 16 + nt * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 16 + nt * 8 + 2 * t] = acc[2];
    d[(g + 8) * 16 + nt * 8 + 2 * t + 1] = acc[3];
  }
}

// Thread 0 issues copies of src chunks 0, 1, 2 in groups 0, 1, 2 (chunk 3 is
// a zero fill in group 2), and chunk 4 uncommitted; after each wait it
// snapshots the shared chunks' first word into out (5 words per snapshot).
__global__ void cp_async_kernel(const uint32_t* src, uint32_t* out) {
  __shared__ __align__(16) uint32_t dst[5 * 4];
  if (threadIdx.x != 0) return;
  sm80::cp_async_16(dst + 0, src + 0, true);
  sm80::cp_async_commit();
  sm80::cp_async_16(dst + 4, src + 4, true);
  sm80::cp_async_commit();
  sm80::cp_async_16(dst + 8, src + 8, true);
  sm80::cp_async_16(dst + 12, src + 12, false);
  sm80::cp_async_commit();
  sm80::cp_async_16(dst + 16, src + 16, true);
  auto snapshot = [&](int s) {
    for (int i = 0; i < 5; ++i) out[5 * s + i] = dst[4 * i + 3];
  };
  snapshot(0);
  sm80::cp_async_wait<2>();
  snapshot(1);
  sm80::cp_async_wait<1>();
  snapshot(2);
  sm80::cp_async_wait<0>();
  snapshot(3);
  sm80::cp_async_commit();
  sm80::cp_async_wait<0>();
  snapshot(4);
}

}  // namespace

TEST_CASE("emu: mma.m16n8k16 with PTX-documented fragments against a CPU product", "[emu][mma_sm80]") {
  check_mma<hg::half>("f16");
  check_mma<hg::bfloat16>("bf16");
}

TEST_CASE("emu: ldmatrix.x4 and .trans give every lane the documented elements", "[emu][mma_sm80]") {
  std::vector<uint16_t> src(32 * 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(1000 + i);
  std::vector<int> perm(32);
  for (int i = 0; i < 32; ++i) perm[i] = (i * 13 + 5) % 32;  // a permutation of the 32 rows
  DeviceBuffer<uint16_t> dsrc(src);
  DeviceBuffer<int> dperm(perm);
  for (bool trans : {false, true}) {
    INFO((trans ? "trans" : "no trans"));
    DeviceBuffer<uint32_t> dout(128);
    HG_LAUNCH(ldmatrix_kernel, dim3(1), dim3(32), 0, nullptr, dsrc.get(), dperm.get(), dout.get(), trans);
    const std::vector<uint32_t> out = dout.download();
    // M_j[i][c] = src[perm[8j + i] * 8 + c]
    auto m = [&](int j, int i, int c) { return static_cast<uint32_t>(src[perm[8 * j + i] * 8 + c]); };
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int j = 0; j < 4; ++j) {
        const uint32_t want =
            trans ? (m(j, 2 * t, g) | (m(j, 2 * t + 1, g) << 16)) : (m(j, g, 2 * t) | (m(j, g, 2 * t + 1) << 16));
        INFO("lane " << lane << " register " << j);
        REQUIRE(out[4 * lane + j] == want);
      }
    }
  }
}

TEST_CASE("emu: ldmatrix feeding mma.m16n8k16 computes a 16x16x16 product", "[emu][mma_sm80]") {
  std::vector<hg::half> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = hg::half(static_cast<float>((i * 29) % 17 - 8) / 4.0f);
    b[i] = hg::half(static_cast<float>((i * 11) % 13 - 6) / 2.0f);
  }
  DeviceBuffer<hg::half> da(a), db(b);
  for (bool b_nk : {true, false}) {
    INFO((b_nk ? "B as [n][k]" : "B as [k][n]"));
    DeviceBuffer<float> dd(256);
    HG_LAUNCH(ldmatrix_mma_kernel<hg::half>, dim3(1), dim3(32), 0, nullptr, da.get(), db.get(), dd.get(), b_nk);
    const std::vector<float> d = dd.download();
    for (int r = 0; r < 16; ++r) {
      for (int n = 0; n < 16; ++n) {
        double ref = 0.0;
        for (int k = 0; k < 16; ++k) {
          const float bv = static_cast<float>(b_nk ? b[n * 16 + k] : b[k * 16 + n]);
          ref += static_cast<double>(static_cast<float>(a[r * 16 + k])) * bv;
        }
        INFO("row " << r << " col " << n);
        REQUIRE(static_cast<double>(d[r * 16 + n]) == ref);
      }
    }
  }
}

TEST_CASE("emu: cp.async copies complete at the wait_group covering their group", "[emu][mma_sm80]") {
  std::vector<uint32_t> src(20);
  for (int i = 0; i < 20; ++i) src[i] = 100u + static_cast<uint32_t>(i);
  DeviceBuffer<uint32_t> dsrc(src), dout(25);
  HG_LAUNCH(cp_async_kernel, dim3(1), dim3(32), 0, nullptr, dsrc.get(), dout.get());
  const std::vector<uint32_t> out = dout.download();
  constexpr uint32_t kPoison = 0xffffffffu;  // Note [Emulated shared memory]
  const uint32_t c0 = 103, c1 = 107, c2 = 111, zero = 0, c4 = 119;
  const std::vector<std::vector<uint32_t>> want = {
      {kPoison, kPoison, kPoison, kPoison, kPoison},  // nothing waited for
      {c0, kPoison, kPoison, kPoison, kPoison},       // wait_group 2: group 0
      {c0, c1, kPoison, kPoison, kPoison},            // wait_group 1: groups 0, 1
      {c0, c1, c2, zero, kPoison},                    // wait_group 0: all committed; chunk 4 uncommitted
      {c0, c1, c2, zero, c4},                         // after its commit and wait
  };
  for (int s = 0; s < 5; ++s) {
    for (int i = 0; i < 5; ++i) {
      INFO("snapshot " << s << " chunk " << i);
      REQUIRE(out[5 * s + i] == want[s][i]);
    }
  }
}
