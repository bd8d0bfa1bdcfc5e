// Data types: one X-macro lists them; names, sizes, printing and dispatch come from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "core/error.h"
#include "core/float8.h"
#include "core/half.h"

namespace hg {

// HG_FORALL_DTYPES(_) calls _(EnumName, c++ type, "name", is_floating) once per dtype.
// Order matters only for the enum values; never reorder (checkpoints store names,
// not numbers, but logs and tests print the enum).
//
// Note [fp8 is storage only]
// The two fp8 formats (core/float8.h) are storage dtypes: tensors of them can
// be created, copied, cast to and from every other dtype, viewed, printed and
// saved, and amp's fp8 kernels (scaled casts, the fp8 GEMM) produce and consume
// them. Arithmetic, reductions, indexing and random fills are not defined on
// them: those ops dispatch with dispatch_compute_dtype, which throws an
// hg::Error naming the op and the dtype. HG_FORALL_COMPUTE_DTYPES lists the
// dtypes that arithmetic is instantiated for, HG_FORALL_FP8_DTYPES the rest.
#define HG_FORALL_COMPUTE_DTYPES(_)     \
  _(F32, float, "f32", true)            \
  _(F16, ::hg::half, "f16", true)       \
  _(BF16, ::hg::bfloat16, "bf16", true) \
  _(F64, double, "f64", true)           \
  _(I64, int64_t, "i64", false)         \
  _(I32, int32_t, "i32", false)         \
  _(U8, uint8_t, "u8", false)           \
  _(Bool, bool, "bool", false)
#define HG_FORALL_FP8_DTYPES(_)                \
  _(F8E4M3, ::hg::float8_e4m3, "f8e4m3", true) \
  _(F8E5M2, ::hg::float8_e5m2, "f8e5m2", true)
#define HG_FORALL_DTYPES(_)   \
  HG_FORALL_COMPUTE_DTYPES(_) \
  HG_FORALL_FP8_DTYPES(_)

enum class DType : uint8_t {
#define HG_DTYPE_ENUM(name, type, str, fp) name,
  HG_FORALL_DTYPES(HG_DTYPE_ENUM)
#undef HG_DTYPE_ENUM
};

// libtorch-style constants: hg::kF16, hg::kF32, ...
#define HG_DTYPE_CONST(name, type, str, fp) inline constexpr DType k##name = DType::name;
HG_FORALL_DTYPES(HG_DTYPE_CONST)
#undef HG_DTYPE_CONST
// libtorch's names for the same dtypes (torch::kHalf, torch::kFloat32, ...).
inline constexpr DType kHalf = DType::F16, kFloat16 = DType::F16;
inline constexpr DType kBFloat16 = DType::BF16;
inline constexpr DType kFloat = DType::F32, kFloat32 = DType::F32;
inline constexpr DType kDouble = DType::F64, kFloat64 = DType::F64;
inline constexpr DType kLong = DType::I64, kInt64 = DType::I64;
inline constexpr DType kInt = DType::I32, kInt32 = DType::I32;
inline constexpr DType kByte = DType::U8, kUInt8 = DType::U8;

inline constexpr int kNumDTypes = 0
#define HG_DTYPE_COUNT(name, type, str, fp) +1
    HG_FORALL_DTYPES(HG_DTYPE_COUNT)
#undef HG_DTYPE_COUNT
    ;

constexpr size_t dtype_size(DType t) {
  switch (t) {
#define HG_DTYPE_SIZE(name, type, str, fp) \
  case DType::name:                        \
    return sizeof(type);
    HG_FORALL_DTYPES(HG_DTYPE_SIZE)
#undef HG_DTYPE_SIZE
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
#define HG_DTYPE_NAME(name, type, str, fp) \
  case DType::name:                        \
    return str;
    HG_FORALL_DTYPES(HG_DTYPE_NAME)
#undef HG_DTYPE_NAME
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  switch (t) {
#define HG_DTYPE_FP(name, type, str, fp) \
  case DType::name:                      \
    return fp;
    HG_FORALL_DTYPES(HG_DTYPE_FP)
#undef HG_DTYPE_FP
  }
  return false;
}

constexpr bool is_16bit_float(DType t) { return t == DType::F16 || t == DType::BF16; }

constexpr bool is_fp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }

// Parses "f16", "float16", "half", "bf16", ... ; throws hg::Error listing valid names.
DType dtype_from_name(std::string_view name);

std::ostream& operator<<(std::ostream& os, DType t);

// The DType of a C++ type: dtype_of<hg::half>() == kF16.
template <typename T>
constexpr DType dtype_of();
#define HG_DTYPE_OF(name, type, str, fp) \
  template <>                            \
  constexpr DType dtype_of<type>() {     \
    return DType::name;                  \
  }
HG_FORALL_DTYPES(HG_DTYPE_OF)
#undef HG_DTYPE_OF

// Runs fn(T{}) with T the C++ type of `t`:
//   dispatch_dtype(t, [&](auto tag) { using T = decltype(tag); ... });
template <typename Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
#define HG_DTYPE_CASE(name, type, str, fp) \
  case DType::name:                        \
    return fn(type{});
    HG_FORALL_DTYPES(HG_DTYPE_CASE)
#undef HG_DTYPE_CASE
  }
  HG_FAIL("dispatch_dtype: unknown dtype value ", static_cast<int>(t));
}

// Same, for the dtypes arithmetic is defined on (every dtype but fp8: Note
// [fp8 is storage only]); `op` names the caller in the error.
template <typename Fn>
decltype(auto) dispatch_compute_dtype(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
#define HG_DTYPE_CASE(name, type, str, fp) \
  case DType::name:                        \
    return fn(type{});
    HG_FORALL_COMPUTE_DTYPES(HG_DTYPE_CASE)
#undef HG_DTYPE_CASE
    default:
      break;
  }
  if (is_fp8(t)) {
    HG_FAIL(op, " is not defined for ", dtype_name(t),
            " tensors: fp8 is a storage format (casts, copies, printing, saving and amp's fp8 kernels);"
            " convert with .to(hg::kBF16) or .to(hg::kF32) first");
  }
  HG_FAIL(op, ": unknown dtype value ", static_cast<int>(t));
}

// Same, restricted to floating dtypes; `op` names the caller in the error.
template <typename Fn>
decltype(auto) dispatch_floating(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::F32:
      return fn(float{});
    case DType::F16:
      return fn(half{});
    case DType::BF16:
      return fn(bfloat16{});
    case DType::F64:
      return fn(double{});
    default:
      HG_FAIL(op, " needs a floating dtype (f32, f16, bf16, f64) but got ", dtype_name(t),
              is_fp8(t) ? " (fp8 is a storage format)" : "", "; convert with .to(hg::kF32) first");
  }
}

}  // namespace hg
