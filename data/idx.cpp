// IDX reader (see idx.h for the format and the validation rules).
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
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

// The file's bytes, inflated when it is gzip (magic 1f 8b), else as they are.
// zlib's gzread would skip anything after the last gzip member, so the
// stream is inflated here: further members (as gzip(1) writes when files are
// concatenated) are read on, and any other trailing bytes are an error.
class IdxInput {
 public:
  explicit IdxInput(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    HG_CHECK(std::filesystem::exists(status), "IDX file '", path,
             "' does not exist; check the path (Fashion-MNIST comes with Debian's "
             "dataset-fashion-mnist package)");
    HG_CHECK(!std::filesystem::is_directory(status), "IDX file '", path,
             "' is a directory; pass the path of the .gz or uncompressed file inside it");
    file_ = std::fopen(path.c_str(), "rb");
    HG_CHECK(file_ != nullptr, "cannot open IDX file '", path, "': ", std::strerror(errno),
             "; check that it is readable");
    refill();
    gzip_ = in_size_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gzip_) {
      HG_CHECK(inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK, "read_idx: zlib's inflateInit2 failed (out of memory?)");
      inflating_ = true;
    }
  }
  ~IdxInput() {
    if (gzip_) inflateEnd(&z_);
    if (file_ != nullptr) std::fclose(file_);
  }
  IdxInput(const IdxInput&) = delete;
  IdxInput& operator=(const IdxInput&) = delete;

  // Reads up to n bytes; returns how many arrived (less only at the end of
  // the data). A damaged or cut-off gzip stream, or bytes after it that are
  // not another gzip member, are errors, not short reads.
  size_t read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t got = 0;
    while (got < n) {
      if (pos_ == in_size_ && !refill()) {
        if (gzip_ && inflating_) fail_stream("the gzip stream is cut off");
        break;
      }
      if (!gzip_) {
        const size_t take = std::min(n - got, in_size_ - pos_);
        std::memcpy(out + got, in_ + pos_, take);
        pos_ += take;
        got += take;
        continue;
      }
      if (!inflating_) {
        // Bytes after a complete member: only another member may follow.
        if (in_[pos_] != 0x1f) fail_stream("there are bytes after the end of the gzip stream (trailing garbage)");
        HG_CHECK(inflateReset(&z_) == Z_OK, "read_idx: zlib's inflateReset failed");
        inflating_ = true;
      }
      z_.next_in = in_ + pos_;
      z_.avail_in = static_cast<uInt>(in_size_ - pos_);
      z_.next_out = out + got;
      z_.avail_out = static_cast<uInt>(std::min(n - got, kReadChunk));
      const uInt out_before = z_.avail_out;
      const int r = inflate(&z_, Z_NO_FLUSH);
      got += out_before - z_.avail_out;
      pos_ = in_size_ - z_.avail_in;
      if (r == Z_STREAM_END) {
        inflating_ = false;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        fail_stream(z_.msg != nullptr ? z_.msg : "inflate failed");
      }
    }
    return got;
  }

 private:
  // Loads the next chunk of raw file bytes; false at the end of the file.
  bool refill() {
    in_size_ = std::fread(in_, 1, sizeof in_, file_);
    pos_ = 0;
    HG_CHECK(!std::ferror(file_), "IDX file '", path_, "': reading failed: ", std::strerror(errno));
    return in_size_ > 0;
  }
  [[noreturn]] void fail_stream(const char* why) {
    HG_FAIL("IDX file '", path_, "' is not a valid gzip file (", why,
            "); the download is probably truncated or corrupt, fetch it again");
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  unsigned char in_[64 * 1024];
  size_t in_size_ = 0, pos_ = 0;
  bool gzip_ = false;
  bool inflating_ = false;  // inside a gzip member (not yet at its end)
  z_stream z_{};
};

uint32_t read_be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path, uint64_t max_bytes) {
  IdxInput reader(path);

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

  Shape shape;
  for (int d = 0; d < ndims; ++d) shape.push_back(static_cast<int64_t>(read_be32(dim_bytes + 4 * d)));
  uint64_t payload = 0;
  try {
    payload = contiguous_nbytes(shape, kU8);  // core/shape.h: checked arithmetic
  } catch (const Error& e) {
    HG_FAIL("IDX file '", path, "' declares dims ", shape_to_string(shape), " which overflow 64 bits (",
            e.message(), "), far more than ", max_bytes, " bytes (the read_idx limit); the header is corrupt");
  }
  HG_CHECK(payload <= max_bytes, "IDX file '", path, "' declares dims ", shape_to_string(shape), " which need ",
           payload, " bytes, more than ", max_bytes,
           " bytes (the read_idx limit); the header is corrupt, or pass a larger max_bytes");

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
