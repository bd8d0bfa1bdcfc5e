// IDX reader (data/idx.cpp), plain and gzip: the first input byte picks the
// mode. Odd: the rest is gzip-compressed here before reading, so the fuzzer
// explores IDX headers inside valid gzip streams. Even: the rest is the file
// as it is (a plain IDX file, or a gzip stream the fuzzer damages).
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/idx.h"
#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

std::vector<unsigned char> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) finding("deflateInit2 failed");
  std::vector<unsigned char> out(deflateBound(&z, static_cast<uLong>(size)) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) finding("deflate did not finish");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

int fuzz_idx(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool compress = (data[0] & 1) != 0;
  std::string path;
  if (compress) {
    const std::vector<unsigned char> gz = gzip(data + 1, size - 1);
    path = input_file(gz.data(), gz.size());
  } else {
    path = input_file(data + 1, size - 1);
  }
  try {
    // A 1 MiB cap keeps every accepted input small, so libFuzzer stays fast.
    const Tensor t = data::read_idx(path, uint64_t{1} << 20);
    if (t.numel() > 0) (void)t.to_vector<int64_t>();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz
