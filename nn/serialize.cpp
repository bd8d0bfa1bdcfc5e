// safetensors reader and atomic writer; see nn/serialize.h and docs/checkpoints.md.
#include "nn/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"
#include "nn/module.h"

namespace hg::nn {

// The buffer is raw little-endian bytes and we copy it straight into tensors.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies bytes verbatim and needs a little-endian host");

namespace {

using Json = nlohmann::ordered_json;  // keeps the writer's tensor order in the header

constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {kF64, "F64"}, {kF32, "F32"}, {kF16, "F16"},   {kBF16, "BF16"},      {kI64, "I64"},
    {kI32, "I32"}, {kU8, "U8"},   {kBool, "BOOL"}, {kF8E4M3, "F8_E4M3"}, {kF8E5M2, "F8_E5M2"},
};
static_assert(std::size(kDTypeNames) == kNumDTypes,
              "every halfgrad dtype needs a safetensors name");

std::string errno_text() { return std::strerror(errno); }

// Owns the reader's POSIX file descriptor (the writer is core/atomic_file.h).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
// Returns the offset of the first bad byte, or nullopt when the text is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t extra = 0;
    uint32_t min_code = 0;
    uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, min_code = 0x80, code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, min_code = 0x800, code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, min_code = 0x10000, code = c & 0x07;
    } else {
      return i;
    }
    if (n - i <= extra) return i;
    for (size_t k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += extra + 1;
  }
  return std::nullopt;
}

// ---- writer --------------------------------------------------------------------

void check_name_utf8(std::string_view what, const std::string& text) {
  HG_CHECK(!find_invalid_utf8(text), "save_safetensors: ", what, " '", text,
           "' is not valid UTF-8; the JSON header can only hold UTF-8 text");
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  for (const DTypeName& entry : kDTypeNames) {
    if (entry.dtype == dtype) return entry.name;
  }
  HG_FAIL("safetensors_dtype_name: unknown dtype value ", static_cast<int>(dtype));
}

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const DTypeName& entry : kDTypeNames) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything that can be checked is checked before the temp file exists.
  std::set<std::string_view> seen;
  for (const auto& [name, tensor] : tensors) {
    HG_CHECK(!name.empty(),
             "save_safetensors: a tensor has an empty name; give every tensor a name");
    HG_CHECK(name != kMetadataKey, "save_safetensors: '", kMetadataKey,
             "' is reserved for the metadata; rename that tensor");
    HG_CHECK(seen.insert(name).second, "save_safetensors: the name '", name,
             "' is used by two tensors; names must be unique");
    HG_CHECK(tensor.defined(), "save_safetensors: tensor '", name, "' is undefined");
    check_name_utf8("tensor name", name);
  }
  for (const auto& [key, value] : metadata) {
    check_name_utf8("metadata key", key);
    check_name_utf8("metadata value", value);
  }

  // Contiguous CPU copies (a no-op for tensors that already are), laid out back to back.
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    Tensor cpu = tensor.cpu().contiguous();
    const uint64_t nbytes = cpu.nbytes();
    header[name] = Json{{"dtype", std::string(safetensors_dtype_name(cpu.dtype()))},
                        {"shape", cpu.sizes()},
                        {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    host.push_back(std::move(cpu));
  }
  std::string header_text = header.dump();
  // Pad with spaces (valid JSON whitespace) so the buffer starts 8-byte aligned,
  // as the reference writer does; readers can then map tensors in place.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  HG_CHECK(header_text.size() <= kSafetensorsMaxHeaderBytes,
           "save_safetensors: the header would be ", header_text.size(), " bytes, over the ",
           kSafetensorsMaxHeaderBytes,
           "-byte limit readers enforce; split the tensors over several files");
  const uint64_t header_length = header_text.size();

  AtomicFile out(path, "save_safetensors");  // temp file, fsync, rename, folder fsync
  out.write(&header_length, sizeof(header_length));
  out.write(header_text);
  for (const Tensor& t : host) {
    if (t.nbytes() > 0) out.write(t.data_ptr(), t.nbytes());
  }
  out.commit();
}

// ---- reader --------------------------------------------------------------------

bool SafetensorsFile::contains(std::string_view name) const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const auto& entry) { return entry.first == name; });
}

const Tensor& SafetensorsFile::at(std::string_view name) const {
  for (const auto& [key, tensor] : tensors) {
    if (key == name) return tensor;
  }
  std::string names;
  for (const auto& entry : tensors) names += (names.empty() ? "" : ", ") + entry.first;
  HG_FAIL("safetensors file has no tensor named '", name,
          "'; it holds: ", names.empty() ? "(none)" : names);
}

namespace {

// One validated header entry.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

// A JSON value that is a non-negative integer fitting `limit`.
std::optional<uint64_t> as_count(const Json& value, uint64_t limit) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    return v <= limit ? std::optional<uint64_t>(v) : std::nullopt;
  }
  // "-0" parses as a signed zero; every other signed integer is negative.
  if (value.is_number_integer() && value.get<int64_t>() == 0) return 0;
  return std::nullopt;
}

// Error messages show at most this much of a value or name from the file.
constexpr size_t kShownChars = 80;
// safetensors headers nest three levels (header, entry, shape list); deeper
// nesting is refused while parsing, so no value is ever deep enough for a
// recursive walk (dump, destruction) to exhaust the stack.
constexpr int kMaxJsonDepth = 8;

std::string clip(std::string_view text) {
  if (text.size() <= kShownChars) return std::string(text);
  return std::string(text.substr(0, kShownChars)) + "... (" + std::to_string(text.size()) + " bytes)";
}

// A short description of a header value for error messages: scalars as
// JSON (clipped), lists and objects by their size only. Never recursive.
std::string describe(const Json& value) {
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + " values";
  if (value.is_object()) return "an object with " + std::to_string(value.size()) + " keys";
  if (value.is_string()) return "the string \"" + clip(value.get_ref<const std::string&>()) + "\"";
  return clip(value.dump());  // number, bool, null: short
}

std::string json_type(const Json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return "negative integer";
  if (value.is_number_float()) return "non-integer number";
  return value.type_name();
}

void read_exact(int fd, void* data, size_t nbytes, uint64_t file_offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (nbytes > 0) {
    const ssize_t got =
        ::pread(fd, p, std::min<size_t>(nbytes, size_t{1} << 30), static_cast<off_t>(file_offset));
    if (got < 0 && errno == EINTR) continue;
    HG_CHECK(
        got > 0, "safetensors file '", path, "': reading failed at byte ", file_offset, ": ",
        got == 0 ? "unexpected end of file (was it truncated while being read?)" : errno_text());
    p += got;
    nbytes -= static_cast<size_t>(got);
    file_offset += static_cast<uint64_t>(got);
  }
}

}  // namespace

// Every failure message starts with the file name and names the broken rule.
#define HG_ST_CHECK(cond, ...) HG_CHECK(cond, "safetensors file '", path, "': ", __VA_ARGS__)

SafetensorsFile load_safetensors(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  HG_ST_CHECK(fd.valid(), "cannot open it: ", errno_text());
  struct stat info {};
  HG_ST_CHECK(::fstat(fd.get(), &info) == 0, "cannot stat it: ", errno_text());
  HG_ST_CHECK(S_ISREG(info.st_mode), "not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);

  // Rule: the 8-byte header length, bounded and inside the file.
  HG_ST_CHECK(file_size >= 8, "the file is ", file_size,
              " bytes, shorter than the 8-byte header length field; it is not a safetensors file");
  uint64_t header_length = 0;
  read_exact(fd.get(), &header_length, sizeof(header_length), 0, path);
  HG_ST_CHECK(header_length <= kSafetensorsMaxHeaderBytes, "header length ", header_length,
              " exceeds the limit of ", kSafetensorsMaxHeaderBytes,
              " bytes (corrupt length field?)");
  HG_ST_CHECK(header_length <= file_size - 8, "header length ", header_length,
              " runs past the end of the file (", file_size - 8,
              " bytes follow the length field); the file is truncated or corrupt");
  const uint64_t buffer_size = file_size - 8 - header_length;

  std::string header_text(header_length, '\0');
  read_exact(fd.get(), header_text.data(), header_text.size(), 8, path);

  // Rule: UTF-8, JSON, an object, no duplicate keys.
  const std::optional<size_t> bad_byte = find_invalid_utf8(header_text);
  HG_ST_CHECK(!bad_byte, "the header is not valid UTF-8 (bad byte at header offset ", *bad_byte,
              ")");
  // nlohmann keeps one value for a repeated key, so a parser callback watches
  // the keys of every object being parsed.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  const Json::parser_callback_t track_keys = [&](int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    HG_ST_CHECK(depth <= kMaxJsonDepth, "the header nests lists or objects more than ", kMaxJsonDepth,
                " levels deep; a safetensors header nests at most 3 (header, entry, shape)");
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty() && !duplicate &&
        !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(header_text, track_keys);
  } catch (const nlohmann::json::exception& e) {
    HG_FAIL("safetensors file '", path, "': the header is not valid JSON: ", clip(e.what()));
  }
  HG_ST_CHECK(header.is_object(), "the header must be a JSON object, but it is a ",
              header.type_name());
  HG_ST_CHECK(!duplicate, "the key '", clip(*duplicate),
              "' appears twice in the header; tensor and metadata names must be unique");

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      // Rule: __metadata__ is an object of strings.
      HG_ST_CHECK(value.is_object(), "'", kMetadataKey,
                  "' must be an object of strings, but it is a ", value.type_name());
      for (const auto& [key, text] : value.items()) {
        HG_ST_CHECK(text.is_string(), "'", kMetadataKey, "' must hold only string values, but '",
                    clip(key), "' is a ", text.type_name());
        result.metadata.emplace(key, text.get<std::string>());
      }
      continue;
    }
    const std::string shown = clip(name);  // names in messages are clipped too
    // Rule: an entry is an object with exactly dtype, shape and data_offsets.
    HG_ST_CHECK(value.is_object(), "entry '", shown, "' must be an object, but it is a ",
                value.type_name());
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      HG_ST_CHECK(value.contains(key), "entry '", shown, "' is missing the key '", key, "'");
    }
    for (const auto& [key, ignored] : value.items()) {
      HG_ST_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", "entry '", shown,
                  "' has an unexpected key '", clip(key),
                  "'; only dtype, shape and data_offsets are allowed");
    }

    // Rule: a known dtype.
    const Json& dtype_json = value["dtype"];
    const std::optional<DType> dtype =
        dtype_json.is_string() ? dtype_from_safetensors_name(dtype_json.get<std::string>())
                               : std::nullopt;
    HG_ST_CHECK(dtype, "entry '", shown, "' has unknown dtype ", describe(dtype_json),
                "; halfgrad reads F64, F32, F16, BF16, I64, I32, U8 and BOOL");

    // Rule: the shape is a list of non-negative integers.
    const Json& shape_json = value["shape"];
    HG_ST_CHECK(shape_json.is_array(), "entry '", shown,
                "': shape must be a list of non-negative integers, but it is a ",
                shape_json.type_name());
    Entry entry{name, *dtype, {}, 0, 0};
    entry.shape.reserve(shape_json.size());
    for (const Json& dim : shape_json) {
      const std::optional<uint64_t> size = as_count(dim, std::numeric_limits<int64_t>::max());
      HG_ST_CHECK(size, "entry '", shown,
                  "': shape must be a list of non-negative integers, but it holds a ",
                  json_type(dim), " (", describe(dim), ")");
      entry.shape.push_back(static_cast<int64_t>(*size));
    }

    // Rule: data_offsets are two integers, begin <= end.
    const Json& offsets = value["data_offsets"];
    const bool two = offsets.is_array() && offsets.size() == 2;
    const std::optional<uint64_t> begin =
        two ? as_count(offsets[0], std::numeric_limits<uint64_t>::max()) : std::nullopt;
    const std::optional<uint64_t> end =
        two ? as_count(offsets[1], std::numeric_limits<uint64_t>::max()) : std::nullopt;
    HG_ST_CHECK(
        begin && end && *begin <= *end, "entry '", shown,
        "': data_offsets must be two non-negative integers [begin, end] with begin <= end, got ",
        offsets.is_array() && offsets.size() == 2 ? "[" + describe(offsets[0]) + ", " + describe(offsets[1]) + "]"
                                                  : describe(offsets));
    entry.begin = *begin;
    entry.end = *end;

    // Rule: shape x dtype size equals the byte span, and the shape has
    // representable strides (checked arithmetic, core/shape.h).
    uint64_t nbytes = 0;
    try {
      nbytes = contiguous_nbytes(entry.shape, entry.dtype);
    } catch (const Error& e) {
      HG_FAIL("safetensors file '", path, "': entry '", shown, "': shape ", shape_to_string(entry.shape),
              " overflows a 64-bit byte count or stride: ", e.message());
    }
    HG_ST_CHECK(nbytes == entry.end - entry.begin, "entry '", shown, "': shape ",
                shape_to_string(entry.shape), " of ", dtype_json.get<std::string>(), " needs ",
                nbytes, " bytes but data_offsets span ", entry.end - entry.begin);

    // Rule: the span lies inside the buffer.
    HG_ST_CHECK(entry.end <= buffer_size, "entry '", shown, "': data_offsets [", entry.begin, ", ",
                entry.end, "] run past the data buffer, which is ", buffer_size, " bytes");
    entries.push_back(std::move(entry));
  }

  // Rules: no two tensors overlap, and together they cover the buffer exactly.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;  // the buffer [0, covered) is accounted for
  const Entry* previous = nullptr;
  for (const Entry* e : by_offset) {
    HG_ST_CHECK(e->begin >= covered, "tensors '", clip(previous->name), "' [", previous->begin, ", ",
                previous->end, "] and '", clip(e->name), "' [", e->begin, ", ", e->end,
                "] overlap in the data buffer");
    HG_ST_CHECK(e->begin == covered, "bytes [", covered, ", ", e->begin,
                ") of the data buffer belong to no tensor (a gap before '", clip(e->name), "')");
    covered = e->end;
    if (e->end > e->begin) previous = e;
  }
  HG_ST_CHECK(covered == buffer_size, "bytes [", covered, ", ", buffer_size,
              ") at the end of the data buffer belong to no tensor (trailing bytes)");

  // Only now, with every size checked against the file, allocate and read.
  const uint64_t buffer_start = 8 + header_length;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    if (t.nbytes() > 0)
      read_exact(fd.get(), t.data_ptr(), t.nbytes(), buffer_start + e.begin, path);
    if (e.dtype == kBool) {
      // Rule: a bool byte is 0 or 1; any other value is undefined behaviour in C++.
      const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < t.nbytes(); ++i) {
        HG_ST_CHECK(bytes[i] <= 1, "entry '", clip(e.name), "' of dtype BOOL holds the byte ",
                    static_cast<int>(bytes[i]), " at element ", i, "; only 0 and 1 are valid");
      }
    }
    result.tensors.emplace_back(e.name, std::move(t));
  }
  return result;
}

#undef HG_ST_CHECK

void save_state_dict(const std::string& path, const Module& module,
                     const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, module.state_dict(), metadata);
}

void load_state_dict(const std::string& path, Module& module, bool strict) {
  module.load_state_dict(load_safetensors(path).tensors, strict);
}

}  // namespace hg::nn
