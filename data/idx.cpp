// IDX reader (see idx.h for the format and the validation rules).
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace hg::data {
namespace {

constexpr uint8_t kIdxTypeU8 = 0x08;
constexpr int kMaxIdxDims = 4;
// Read granularity: big enough that gzread's per-call overhead vanishes,
// small enough that a lying header costs at most this much extra memory.
constexpr size_t kReadChunk = size_t{1} << 20;

const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "not an IDX type";
  }
}

// Owns a gzFile so every error path closes it.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    HG_CHECK(std::filesystem::exists(path, ec), "IDX file '", path,
             "' does not exist; check the path (Fashion-MNIST comes with Debian's "
             "dataset-fashion-mnist package)");
    HG_CHECK(!std::filesystem::is_directory(path, ec), "IDX file '", path,
             "' is a directory; pass the path of the .gz or uncompressed file inside it");
    file_ = gzopen(path.c_str(), "rb");
    HG_CHECK(file_ != nullptr, "cannot open IDX file '", path, "': ", std::strerror(errno),
             "; check that it is readable");
    gzbuffer(file_, 256 * 1024);  // fewer syscalls and inflate calls for 47 MB files
  }
  ~GzReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many arrived (less only at end of data).
  // A damaged gzip stream is an error, not a short read.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    auto* out = static_cast<unsigned char*>(dst);
    while (got < n) {
      const unsigned want = static_cast<unsigned>(std::min(n - got, kReadChunk));
      const int r = gzread(file_, out + got, want);
      if (r < 0) fail_stream();
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    // zlib reports a cut-off gzip stream (Z_BUF_ERROR) only through gzerror.
    int code = Z_OK;
    gzerror(file_, &code);
    if (code != Z_OK) fail_stream();
    return got;
  }

 private:
  [[noreturn]] void fail_stream() {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    HG_FAIL("IDX file '", path_, "' is not a valid gzip stream (zlib: ",
            message != nullptr ? message : "unknown error",
            "); the download is probably truncated or corrupt, fetch it again");
  }

  std::string path_;
  gzFile file_ = nullptr;
};

uint32_t read_be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path, uint64_t max_bytes) {
  GzReader reader(path);

  unsigned char magic[4];
  const size_t got_magic = reader.read(magic, sizeof magic);
  HG_CHECK(got_magic == sizeof magic, "IDX file '", path, "' is too short: expected a 4-byte ",
           "header (00 00 type ndims) but found ", got_magic, " bytes");
  HG_CHECK(magic[0] == 0 && magic[1] == 0, "IDX file '", path,
           "' has a bad magic number: expected the first two bytes to be 00 00 but found ",
           static_cast<int>(magic[0]), " ", static_cast<int>(magic[1]),
           "; this is not an IDX file (or it is compressed with something other than gzip)");
  const uint8_t type = magic[2];
  HG_CHECK(type == kIdxTypeU8, "IDX file '", path, "' has element type 0x", std::hex,
           static_cast<int>(type), std::dec, " (", idx_type_name(type),
           "); only type 0x08 (unsigned byte) is supported, which is what (Fashion-)MNIST uses");
  const int ndims = magic[3];
  HG_CHECK(ndims >= 1 && ndims <= kMaxIdxDims, "IDX file '", path, "' declares ", ndims,
           " dimensions; expected 1 to ", kMaxIdxDims);

  unsigned char dim_bytes[4 * kMaxIdxDims];
  const size_t want_dims = 4 * static_cast<size_t>(ndims);
  const size_t got_dims = reader.read(dim_bytes, want_dims);
  HG_CHECK(got_dims == want_dims, "IDX file '", path, "' is truncated in its header: expected ",
           want_dims, " bytes of dimensions but found ", got_dims);

  // Each dim < 2^32 and the running product is kept <= max_bytes (<= 2^62 is
  // enforced below), so the product never overflows 64 bits.
  HG_CHECK(max_bytes <= (uint64_t{1} << 62), "read_idx: max_bytes ", max_bytes,
           " is too large; use at most 2^62");
  Shape shape;
  uint64_t payload = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t size = read_be32(dim_bytes + 4 * d);
    shape.push_back(static_cast<int64_t>(size));
    payload *= size;
    if (payload > max_bytes) {
      HG_FAIL("IDX file '", path, "' declares dims ", shape_to_string(shape),
              (d + 1 < ndims ? "..." : ""), " which need more than ", max_bytes,
              " bytes (the read_idx limit); the header is corrupt, or pass a larger max_bytes");
    }
  }

  // Grow the buffer only as bytes actually arrive: the header is untrusted.
  std::vector<unsigned char> buffer;
  while (buffer.size() < payload) {
    const size_t old_size = buffer.size();
    const size_t step = static_cast<size_t>(std::min<uint64_t>(payload - old_size, kReadChunk));
    buffer.resize(old_size + step);
    const size_t got = reader.read(buffer.data() + old_size, step);
    buffer.resize(old_size + got);
    if (got < step) break;
  }
  HG_CHECK(buffer.size() == payload, "IDX file '", path, "' is truncated: dims ",
           shape_to_string(shape), " need ", payload, " bytes of data but only ", buffer.size(),
           " follow the header; fetch the file again");
  unsigned char extra = 0;
  HG_CHECK(reader.read(&extra, 1) == 0, "IDX file '", path, "' has trailing data: dims ",
           shape_to_string(shape), " need exactly ", payload,
           " bytes of data but more follow; the file is corrupt or the header is wrong");

  Tensor out = empty(shape, {.dtype = kU8});
  if (payload > 0) std::memcpy(out.data<uint8_t>(), buffer.data(), buffer.size());
  return out;
}

}  // namespace hg::data
