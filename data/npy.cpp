// .npy reader and writer (see npy.h for the format and the rules).
#include "data/npy.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/atomic_file.h"

namespace hg::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "npy.cpp copies raw bytes and assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kHeaderAlign = 64;  // numpy pads preamble + header to this

struct DescrEntry {
  const char* descr;
  DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"<f4", kF32}, {"<f2", kF16}, {"<f8", kF64}, {"<i8", kI64},
    {"<i4", kI32}, {"|u1", kU8},  {"|b1", kBool},
};
constexpr const char* kSupportedDescrs = "'<f4', '<f2', '<f8', '<i8', '<i4', '|u1', '|b1'";

const char* descr_of(DType dtype) {
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) return e.descr;
  }
  return nullptr;
}

// A strict parser for the one dict literal numpy writes. Only the syntax
// numpy (and Python's repr) produces is accepted.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  void parse(DType* dtype, Shape* shape) {
    std::optional<DType> descr;
    std::optional<bool> fortran;
    std::optional<Shape> dims;
    skip_space();
    expect('{');
    skip_space();
    while (!peek('}')) {
      if (pos_ >= text_.size()) fail("unterminated dict: expected '}'");
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (descr) fail("duplicate key 'descr'");
        descr = parse_descr(parse_string());
      } else if (key == "fortran_order") {
        if (fortran) fail("duplicate key 'fortran_order'");
        fortran = parse_bool();
      } else if (key == "shape") {
        if (dims) fail("duplicate key 'shape'");
        dims = parse_shape();
      } else {
        fail("unknown key '" + key + "' (expected only 'descr', 'fortran_order', 'shape')");
      }
      skip_space();
      if (pos_ >= text_.size()) fail("unterminated dict: expected '}'");
      if (!peek('}')) {
        expect(',');
        skip_space();
      }
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    if (!descr || !fortran || !dims) {
      fail("missing key(s):" + std::string(descr ? "" : " 'descr'") +
           (fortran ? "" : " 'fortran_order'") + (dims ? "" : " 'shape'"));
    }
    if (*fortran) {
      HG_FAIL("npy file '", path_, "' is stored in Fortran (column-major) order, which is not ",
              "supported; save it from NumPy with np.save(path, np.ascontiguousarray(a))");
    }
    *dtype = *descr;
    *shape = *dims;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    constexpr size_t kShown = 200;
    HG_FAIL("npy file '", path_, "' has a malformed header: ", why, " at character ", pos_,
            " of: ", text_.substr(0, kShown), text_.size() > kShown ? "..." : "");
  }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  std::string parse_string() {
    if (!peek('\'') && !peek('"')) fail("expected a quoted string");
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail("escapes are not allowed in keys or dtypes");
      ++pos_;
    }
    if (pos_ == text_.size()) fail("unterminated string");
    return text_.substr(start, pos_++ - start);
  }
  bool parse_bool() {
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  int64_t parse_int() {
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      fail("expected a non-negative integer in 'shape'");
    }
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_++] - '0';
      if (value > (INT64_MAX - digit) / 10) fail("a 'shape' entry does not fit in 64 bits");
      value = value * 10 + digit;
    }
    return value;
  }
  Shape parse_shape() {
    Shape shape;
    expect('(');
    skip_space();
    bool trailing_comma = false;
    while (!peek(')')) {
      shape.push_back(parse_int());
      skip_space();
      trailing_comma = false;
      if (!peek(')')) {
        expect(',');
        skip_space();
        trailing_comma = true;
      }
    }
    expect(')');
    // Python needs "(5,)" for a 1-tuple; "(5)" is just the integer 5.
    if (shape.size() == 1 && !trailing_comma) fail("a 1-element shape must be written '(n,)'");
    return shape;
  }
  DType parse_descr(const std::string& descr) {
    for (const DescrEntry& e : kDescrs) {
      if (descr == e.descr) return e.dtype;
    }
    if (!descr.empty() && descr[0] == '>') {
      HG_FAIL("npy file '", path_, "' holds big-endian data ('", descr, "'), which is not ",
              "supported; convert in NumPy with a.astype(a.dtype.newbyteorder('<'))");
    }
    HG_FAIL("npy file '", path_, "' has dtype '", descr, "', which halfgrad does not read; ",
            "supported: ", kSupportedDescrs, ". Convert in NumPy, e.g. a.astype('<f4')");
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// The .npy header then the data, written atomically (core/atomic_file.h).
void write_file_atomically(const std::string& path, const std::string& header,
                           const void* data, size_t nbytes) {
  namespace fs = std::filesystem;
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  HG_CHECK(fs::is_directory(folder, ec), "write_npy: folder '", folder.string(),
           "' does not exist; create it first");
  AtomicFile out(path, "write_npy");
  out.write(header);
  if (nbytes > 0) out.write(data, nbytes);
  out.commit();
}

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void write_npy(const std::string& path, const Tensor& t) {
  HG_CHECK(t.defined(), "write_npy: the tensor is undefined");
  HG_CHECK(t.dtype() != kBF16, "write_npy: bf16 has no NumPy dtype; convert with ",
           ".to(hg::kF32) first (exact), and back with .to(hg::kBF16) after reading");
  const char* descr = descr_of(t.dtype());
  HG_CHECK(descr != nullptr, "write_npy: dtype ", dtype_name(t.dtype()), " has no .npy mapping");
  const Tensor host = t.cpu().contiguous();

  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t d = 0; d < host.sizes().size(); ++d) {
    dict += std::to_string(host.sizes()[d]);
    if (host.dim() == 1 || d + 1 < host.sizes().size()) dict += ",";
    if (d + 1 < host.sizes().size()) dict += " ";
  }
  dict += "), }";
  // Version 1.0 when the padded header fits its u16 length, else 2.0.
  const auto padded_size = [&](size_t preamble_size) {
    const size_t unpadded = preamble_size + dict.size() + 1;  // + '\n'
    return (unpadded + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign;
  };
  const bool v1 = padded_size(kMagicLen + 4) - (kMagicLen + 4) <= 0xffff;
  const size_t preamble = kMagicLen + 2 + (v1 ? 2 : 4);
  const size_t unpadded = preamble + dict.size() + 1;
  const size_t padded = padded_size(preamble);
  dict.append(padded - unpadded, ' ');
  dict += '\n';

  std::string header(kMagic, kMagicLen);
  header += static_cast<char>(v1 ? 1 : 2);
  header += static_cast<char>(0);
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (v1 ? 2u : 4u); ++i) header += static_cast<char>((len >> (8 * i)) & 0xff);
  header += dict;
  write_file_atomically(path, header, host.numel() > 0 ? host.data_ptr() : nullptr, host.nbytes());
}

Tensor read_npy(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  HG_CHECK(fs::is_regular_file(path, ec), "npy file '", path, "' does not exist (or is not a ",
           "regular file); check the path");
  const uint64_t file_size = fs::file_size(path, ec);
  HG_CHECK(!ec, "npy file '", path, "': cannot read its size: ", ec.message());
  std::ifstream in(path, std::ios::binary);
  HG_CHECK(in.good(), "cannot open npy file '", path, "': ", std::strerror(errno));

  unsigned char pre[12] = {};
  HG_CHECK(file_size >= 10 && in.read(reinterpret_cast<char*>(pre), 10),
           "npy file '", path, "' is too short (", file_size, " bytes) to hold a .npy header");
  HG_CHECK(std::memcmp(pre, kMagic, kMagicLen) == 0, "npy file '", path,
           "' does not start with the .npy magic \\x93NUMPY; it is not a .npy file ",
           "(an .npz archive must be unzipped first)");
  const int major = pre[6], minor = pre[7];
  HG_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, "npy file '", path,
           "' has format version ", major, ".", minor, "; supported: 1.0, 2.0, 3.0");
  size_t preamble = 10;
  uint32_t header_len = read_le(pre + 8, 2);
  if (major >= 2) {
    HG_CHECK(file_size >= 12 && in.read(reinterpret_cast<char*>(pre + 10), 2), "npy file '",
             path, "' is too short to hold a version ", major, " header");
    header_len = read_le(pre + 8, 4);
    preamble = 12;
  }
  HG_CHECK(header_len <= kNpyMaxHeaderBytes, "npy file '", path, "' declares a ", header_len,
           "-byte header; the limit is ", kNpyMaxHeaderBytes, " bytes, so the file is corrupt");
  HG_CHECK(preamble + header_len <= file_size, "npy file '", path, "' declares a ", header_len,
           "-byte header but only ", file_size - preamble, " bytes follow the preamble");
  std::string text(header_len, '\0');
  HG_CHECK(in.read(text.data(), header_len), "npy file '", path, "': reading the header failed");
  for (unsigned char c : text) {
    HG_CHECK((c >= 0x20 && c < 0x7f) || c == '\n', "npy file '", path,
             "' has a non-ASCII or control byte (", static_cast<int>(c), ") in its header");
  }

  DType dtype = kF32;
  Shape shape;
  HeaderParser(text, path).parse(&dtype, &shape);

  // shape x itemsize must equal the rest of the file, checked without overflow
  // and before allocating anything.
  const uint64_t remaining = file_size - preamble - header_len;
  uint64_t expected = 0;
  try {
    expected = contiguous_nbytes(shape, dtype);  // core/shape.h: checked arithmetic
  } catch (const Error& e) {
    HG_FAIL("npy file '", path, "': shape ", shape_to_string(shape), " overflows 64 bits (", e.message(),
            "); the header is corrupt");
  }
  HG_CHECK(expected == remaining, "npy file '", path, "': shape ", shape_to_string(shape), " of ",
           dtype_name(dtype), " needs ", expected, " bytes of data but ", remaining,
           " bytes follow the header (", expected > remaining ? "truncated file" : "trailing data",
           ")");

  Tensor out = empty(shape, {.dtype = dtype});
  if (expected > 0) {
    HG_CHECK(in.read(static_cast<char*>(out.data_ptr()), static_cast<std::streamsize>(expected)),
             "npy file '", path, "': reading ", expected, " bytes of data failed");
  }
  if (dtype == kBool) {
    const auto* bytes = static_cast<const unsigned char*>(out.data_ptr());
    for (uint64_t i = 0; i < expected; ++i) {
      HG_CHECK(bytes[i] <= 1, "npy file '", path, "': bool element ", i, " has byte value ",
               static_cast<int>(bytes[i]), "; only 0 and 1 are valid bools");
    }
  }
  return out;
}

}  // namespace hg::data
