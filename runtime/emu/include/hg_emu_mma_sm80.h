// cuda-emu stand-ins for the sm_80 warp-level PTX instructions that
// kernels/cuda/mma_sm80.cuh wraps (the gpu build emits the instructions through
// inline PTX; the emu build calls these):
//   mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
//   ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16
//   cp.async.cg.shared.global (16 bytes, optional zero fill), commit_group, wait_group
//
// Note [Emulated mma.sync and ldmatrix fragments]
// Unlike WMMA (Note [Emulated WMMA fragments] in mma.h), these instructions
// document which lane holds which element, and kernels rely on it (the
// accumulator of one mma is repacked as the A operand of the next), so the
// emulator implements the PTX ISA mapping exactly. With lane = linear thread
// id % 32, g = lane / 4 and t = lane % 4, each 32-bit register holding two
// 16-bit elements (the lower column/row in the low half):
//   A (16x16, row)  a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]
//                   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   B (16x8, col)   b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]
//   C, D (16x8 f32) c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
//   ldmatrix .x4    lane 8j + r gives the address of row r of 8x8 matrix j
//                   (8 contiguous 16-bit elements, 16-byte aligned); register j
//                   of every lane receives M_j[g][2t, 2t+1], or with .trans
//                   M_j[2t][g] (low) and M_j[2t+1][g] (high).
// The whole warp must execute each of these (they are .sync.aligned): every
// call starts with a rendezvous of the 32 lanes (__syncwarp), after which each
// lane's operands are visible to the others through a per-lane staging slot,
// and ends with a second rendezvous so no lane reuses its slot before every
// lane has read it. mma products and sums are fp32, in k order.
//
// Note [Emulated cp.async groups]
// cp.async is asynchronous: the copy is only guaranteed complete after a
// cp.async.wait_group that covers its group. The emulator makes that
// observable by deferring every copy: cp_async_16 records (dst, src, bytes)
// in the calling thread's pending list, commit closes the thread's current
// group, and wait_group<N> performs, in issue order, the copies of every
// committed group except the N most recent. A kernel that reads shared memory
// before the matching wait therefore reads the poison of Note [Emulated shared
// memory] (NaN), and one that waits for too few groups reads stale or poisoned
// data. Copies not yet committed are not completed by a wait (as in PTX).
// Pending copies of a block that finished are dropped (the block's shared
// memory is gone).
#pragma once

#include <cstdint>
#include <cstring>
#include <source_location>
#include <utility>
#include <vector>

#include "hg_emu_device.h"
#include "hg_emu_float16.h"

namespace hg::emu::detail {
// How many blocks the engine has started (runtime/emu/engine.cpp): distinct
// for every block, so per-thread state can tell a new block from an old one.
uint64_t block_serial();
}  // namespace hg::emu::detail

namespace hg::emu::sm80 {

namespace detail {

struct LaneSlot {
  uint32_t a[4];
  uint32_t b[2];
  const void* address;
};
// Indexed by the linear thread id; plain globals (launches are serialised, one
// block runs at a time: Note [Emulated shared memory]).
inline LaneSlot g_slots[1024];

inline unsigned lane_id() { return ::hg::emu::detail::g_thread->linear_id % 32u; }
inline unsigned warp_base() { return ::hg::emu::detail::g_thread->linear_id & ~31u; }
inline void rendezvous(const std::source_location& where) { __syncwarp(0xffffffffu, where); }

inline float element(uint32_t reg, unsigned hi, bool bf16) {
  const auto bits = static_cast<uint16_t>(hi != 0 ? reg >> 16 : reg & 0xffffu);
  return bf16 ? ::hg::detail::bfloat16_bits_to_float(bits) : ::hg::detail::half_bits_to_float(bits);
}

// A[r][k] of the warp's A operand (Note [Emulated mma.sync and ldmatrix fragments]).
inline float a_at(unsigned base, unsigned r, unsigned k, bool bf16) {
  const unsigned lane = 4 * (r % 8) + (k % 8) / 2;
  return element(g_slots[base + lane].a[r / 8 + 2 * (k / 8)], k % 2, bf16);
}
// B[k][n] of the warp's B operand.
inline float b_at(unsigned base, unsigned k, unsigned n, bool bf16) {
  const unsigned lane = 4 * n + (k % 8) / 2;
  return element(g_slots[base + lane].b[k / 8], k % 2, bf16);
}

inline void mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, bool bf16, const std::source_location& where) {
  rendezvous(where);
  const unsigned lane = lane_id(), base = warp_base();
  LaneSlot& mine = g_slots[base + lane];
  std::memcpy(mine.a, a, sizeof(mine.a));
  std::memcpy(mine.b, b, sizeof(mine.b));
  rendezvous(where);
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned r = g + 8 * (i / 2), n = 2 * t + i % 2;
    float acc = d[i];
    for (unsigned k = 0; k < 16; ++k) acc += a_at(base, r, k, bf16) * b_at(base, k, n, bf16);
    d[i] = acc;
  }
  rendezvous(where);
}

inline uint16_t load_u16(const void* row, unsigned col) {
  uint16_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(row) + 2 * col, 2);
  return v;
}

}  // namespace detail

// d += a b for f16 (bf16 = false) or bf16 inputs; d, a, b as in PTX (4, 4 and 2 registers).
inline void mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, bool bf16,
                         const std::source_location& where = std::source_location::current()) {
  detail::mma_m16n8k16(d, a, b, bf16, where);
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: r[0..3] from the row
// addresses of the warp's lanes.
inline void ldmatrix_x4(uint32_t* r, const void* row, bool trans,
                        const std::source_location& where = std::source_location::current()) {
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0) {
    ::hg::emu::detail::device_trap("ldmatrix: a row address is not 16-byte aligned", where);
  }
  detail::rendezvous(where);
  const unsigned lane = detail::lane_id(), base = detail::warp_base();
  detail::g_slots[base + lane].address = row;
  detail::rendezvous(where);
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned j = 0; j < 4; ++j) {
    uint32_t lo, hi;
    if (!trans) {
      const void* p = detail::g_slots[base + 8 * j + g].address;
      lo = detail::load_u16(p, 2 * t);
      hi = detail::load_u16(p, 2 * t + 1);
    } else {
      lo = detail::load_u16(detail::g_slots[base + 8 * j + 2 * t].address, g);
      hi = detail::load_u16(detail::g_slots[base + 8 * j + 2 * t + 1].address, g);
    }
    r[j] = lo | (hi << 16);
  }
  detail::rendezvous(where);
}

namespace detail {
struct CpAsyncCopy {
  void* dst;
  const void* src;
  unsigned src_bytes;  // 16, or 0: zero fill
  unsigned group;      // index of the group it belongs to (== committed count when issued)
};
struct CpAsyncLane {
  uint64_t block_serial = 0;
  unsigned committed = 0;  // groups committed so far
  unsigned completed = 0;  // groups completed (all before this index)
  std::vector<CpAsyncCopy> pending;
};
inline CpAsyncLane g_cp_async[1024];

inline CpAsyncLane& cp_async_lane() {
  CpAsyncLane& lane = g_cp_async[::hg::emu::detail::g_thread->linear_id];
  const uint64_t serial = ::hg::emu::detail::block_serial();
  if (lane.block_serial != serial) {  // a new block: drop the old block's copies
    lane = CpAsyncLane{};
    lane.block_serial = serial;
  }
  return lane;
}
}  // namespace detail

// cp.async.cg.shared.global [dst], [src], 16, src_bytes (src_bytes 16 or 0).
inline void cp_async_16(void* dst, const void* src, unsigned src_bytes,
                        const std::source_location& where = std::source_location::current()) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || (src_bytes != 0 && reinterpret_cast<uintptr_t>(src) % 16 != 0)) {
    ::hg::emu::detail::device_trap("cp.async: a 16-byte copy needs 16-byte aligned addresses", where);
  }
  if (src_bytes != 0 && src_bytes != 16) ::hg::emu::detail::device_trap("cp.async: src_bytes must be 0 or 16", where);
  detail::CpAsyncLane& lane = detail::cp_async_lane();
  lane.pending.push_back(detail::CpAsyncCopy{dst, src, src_bytes, lane.committed});
}

inline void cp_async_commit() { ++detail::cp_async_lane().committed; }

// cp.async.wait_group n: completes every committed group but the n most recent.
inline void cp_async_wait(unsigned n) {
  detail::CpAsyncLane& lane = detail::cp_async_lane();
  const unsigned upto = lane.committed > n ? lane.committed - n : 0;  // groups [0, upto) complete
  if (upto <= lane.completed) return;
  std::vector<detail::CpAsyncCopy> keep;
  for (const detail::CpAsyncCopy& c : lane.pending) {
    if (c.group < upto) {
      if (c.src_bytes == 0) {
        std::memset(c.dst, 0, 16);
      } else {
        std::memcpy(c.dst, c.src, 16);
      }
    } else {
      keep.push_back(c);
    }
  }
  lane.pending = std::move(keep);
  lane.completed = upto;
}

}  // namespace hg::emu::sm80
