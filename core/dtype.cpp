#include "core/dtype.h"

#include <ostream>
#include <string>
#include <string_view>

namespace hg {

DType dtype_from_name(std::string_view name) {
#define HG_DTYPE_PARSE(ename, type, str, fp) \
  if (name == str) return DType::ename;
  HG_FORALL_DTYPES(HG_DTYPE_PARSE)
#undef HG_DTYPE_PARSE
  // PyTorch spellings.
  if (name == "float32" || name == "float") return DType::F32;
  if (name == "float16" || name == "half") return DType::F16;
  if (name == "bfloat16") return DType::BF16;
  if (name == "float64" || name == "double") return DType::F64;
  if (name == "int64" || name == "long") return DType::I64;
  if (name == "int32" || name == "int") return DType::I32;
  if (name == "uint8") return DType::U8;
  if (name == "float8_e4m3fn" || name == "f8_e4m3" || name == "e4m3") return DType::F8E4M3;
  if (name == "float8_e5m2" || name == "f8_e5m2" || name == "e5m2") return DType::F8E5M2;
  std::string valid;
#define HG_DTYPE_LIST(ename, type, str, fp) valid += std::string(valid.empty() ? "" : ", ") + str;
  HG_FORALL_DTYPES(HG_DTYPE_LIST)
#undef HG_DTYPE_LIST
  HG_FAIL("unknown dtype '", name, "'; valid names are ", valid,
          " (or PyTorch's float16, bfloat16, float32, float8_e4m3fn, ...)");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

std::ostream& operator<<(std::ostream& os, half h) { return os << static_cast<float>(h); }
std::ostream& operator<<(std::ostream& os, bfloat16 b) { return os << static_cast<float>(b); }
std::ostream& operator<<(std::ostream& os, float8_e4m3 v) { return os << static_cast<float>(v); }
std::ostream& operator<<(std::ostream& os, float8_e5m2 v) { return os << static_cast<float>(v); }

}  // namespace hg
