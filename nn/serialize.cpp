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
#include <exception>
#include <functional>

#include "core/atomic_file.h"
#include "core/hash.h"
#include "nn/module.h"

namespace hg::nn {

// The buffer is raw little-endian bytes and we copy it straight into tensors.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies bytes verbatim and needs a little-endian host");

namespace {

// Header values are parsed entry by entry (HeaderReader below); the writer
// writes the header text itself, in the tensors' order.
using Json = nlohmann::json;

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
  // The header text is assembled entry by entry (linear in the number of
  // tensors; the names are unique, checked above):
  // {"__metadata__":{...},"<name>":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...}
  std::string header_text = "{";
  auto add_entry = [&](std::string_view key, const std::string& value_json) {
    if (header_text.size() > 1) header_text += ',';
    header_text += Json(std::string(key)).dump();
    header_text += ':';
    header_text += value_json;
  };
  for (const auto& [name, tensor] : tensors) host.push_back(tensor.cpu().contiguous());
  Xxh64 hash;  // Note [Integrity hash]: the data section, in file order
  for (const Tensor& t : host) {
    if (t.nbytes() > 0) hash.update(t.data_ptr(), t.nbytes());
  }
  Json meta = Json::object();
  for (const auto& [key, value] : metadata) meta[key] = value;
  meta[kIntegrityKey] = hex64(hash.digest());
  add_entry(kMetadataKey, meta.dump());
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].first;
    const Tensor& cpu = host[i];
    const uint64_t nbytes = cpu.nbytes();
    add_entry(name, "{\"dtype\":\"" + std::string(safetensors_dtype_name(cpu.dtype())) +
                        "\",\"shape\":" + Json(cpu.sizes()).dump() + ",\"data_offsets\":[" + std::to_string(offset) +
                        "," + std::to_string(offset + nbytes) + "]}");
    offset += nbytes;
  }
  header_text += '}';
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

// Note [Linear-time header parse]
// A SAX handler walks the header text once. Each top-level entry (a tensor's
// object, or __metadata__) is built as its own small value and handed to
// `on_entry` as soon as it is complete, so the header is never one big DOM:
// nlohmann's DOM parser with a parser callback rescans the parent object at
// every object end, which made a header with n tensors cost O(n^2). Nested
// values are map-based (duplicate keys looked up in O(log n)), so the parse
// is O(n log n) in the header size with small constants; a 1M-tensor header
// is timed by hg-bench's safetensors_header rows.
// The errors keep their priority: JSON syntax first (thrown by the parser),
// then a non-object header, then a duplicated key, then the first entry that
// breaks a rule (entries are validated as they arrive, the first failure is
// held back until the whole text has parsed).
// The header object's keys, for the duplicate check: open addressing over
// the keys' hashes, the keys themselves back to back in one string, so a
// million keys cost a few arrays instead of a million hash-set nodes.
class KeySet {
 public:
  // False when `key` was inserted before.
  bool insert(std::string_view key) {
    if (2 * (hashes_.size() + 1) > slots_.size()) grow();
    const uint64_t h = std::hash<std::string_view>{}(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint32_t slot = slots_[i];
      if (slot == 0) {
        slots_[i] = static_cast<uint32_t>(hashes_.size() + 1);
        hashes_.push_back(h);
        starts_.push_back(arena_.size());
        arena_.append(key);
        return true;
      }
      if (hashes_[slot - 1] == h && stored(slot - 1) == key) return false;
    }
  }

 private:
  std::string_view stored(size_t index) const {
    const size_t end = index + 1 < starts_.size() ? starts_[index + 1] : arena_.size();
    return std::string_view(arena_).substr(starts_[index], end - starts_[index]);
  }
  void grow() {
    slots_.assign(std::max<size_t>(1024, 2 * slots_.size()), 0);
    const size_t mask = slots_.size() - 1;
    for (size_t k = 0; k < hashes_.size(); ++k) {
      size_t i = hashes_[k] & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = static_cast<uint32_t>(k + 1);
    }
  }

  std::vector<uint32_t> slots_;  // 0: empty, else index + 1 (a header holds < 2^32 keys)
  std::vector<uint64_t> hashes_;
  std::vector<size_t> starts_;
  std::string arena_;
};

class HeaderReader {
 public:
  using OnEntry = std::function<void(const std::string& name, const Json& value)>;
  HeaderReader(const std::string& path, OnEntry on_entry) : path_(path), on_entry_(std::move(on_entry)) {}

  // nlohmann's SAX interface.
  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return put(Json(v)); }
  bool string(Json::string_t& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return put(Json::binary(std::move(v))); }  // never in JSON text
  bool start_object(std::size_t /*size*/) { return open(Json::object()); }
  bool start_array(std::size_t /*size*/) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(Json::string_t& k) {
    if (stack_.empty()) {  // a key of the header object
      if (!top_keys_.insert(k) && !duplicate_) duplicate_ = k;
      top_key_ = std::move(k);
    } else {
      if (stack_.back().contains(k) && !duplicate_) duplicate_ = k;
      keys_.back() = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& e) {
    HG_FAIL("safetensors file '", path_, "': the header is not valid JSON: ", clip(e.what()));
  }

  // After the parse: the held-back errors, in priority order.
  void finish() const {
    HG_CHECK(root_type_ == "object", "safetensors file '", path_, "': the header must be a JSON object, but it is a ",
             root_type_);
    HG_CHECK(!duplicate_, "safetensors file '", path_, "': the key '", clip(*duplicate_),
             "' appears twice in the header; tensor and metadata names must be unique");
    if (first_error_) std::rethrow_exception(first_error_);
  }

 private:
  bool open(Json container) {
    if (depth_ == 0) {
      root_type_ = container.type_name();
    } else {
      HG_CHECK(depth_ < kMaxJsonDepth, "safetensors file '", path_, "': the header nests lists or objects more than ",
               kMaxJsonDepth, " levels deep; a safetensors header nests at most 3 (header, entry, shape)");
      stack_.push_back(std::move(container));
      keys_.emplace_back();
    }
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    if (depth_ == 0) return true;  // the header object itself
    Json done = std::move(stack_.back());
    stack_.pop_back();
    keys_.pop_back();
    return put(std::move(done));
  }
  bool put(Json value) {
    if (depth_ == 0) {
      root_type_ = value.type_name();  // a header that is a bare scalar
    } else if (stack_.empty()) {
      // A complete top-level value: a tensor entry or the metadata.
      if (root_type_ == "object" && !first_error_) {
        try {
          on_entry_(top_key_, value);
        } catch (const Error&) {
          first_error_ = std::current_exception();
        }
      }
    } else if (stack_.back().is_object()) {
      stack_.back()[keys_.back()] = std::move(value);
    } else {
      stack_.back().push_back(std::move(value));
    }
    return true;
  }

  const std::string& path_;
  OnEntry on_entry_;
  int depth_ = 0;                   // open lists and objects, the header object included
  std::string root_type_ = "null";  // the header value's JSON type
  std::vector<Json> stack_;         // the open lists and objects below the header object
  std::vector<std::string> keys_;   // per entry of stack_: the key its next value goes to
  std::string top_key_;             // the header object's current key
  KeySet top_keys_;
  std::optional<std::string> duplicate_;
  std::exception_ptr first_error_;
};

}  // namespace

// Every failure message starts with the file name and names the broken rule.
#define HG_ST_CHECK(cond, ...) HG_CHECK(cond, "safetensors file '", path, "': ", __VA_ARGS__)

SafetensorsFile load_safetensors(const std::string& path, const SafetensorsReadOptions& options) {
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

  // Rule: UTF-8, JSON, an object, no duplicate keys (Note [Linear-time header parse]).
  const std::optional<size_t> bad_byte = find_invalid_utf8(header_text);
  HG_ST_CHECK(!bad_byte, "the header is not valid UTF-8 (bad byte at header offset ", *bad_byte, ")");
  SafetensorsFile result;
  std::vector<Entry> entries;
  const auto check_entry = [&](const std::string& name, const Json& value) {
    if (name == kMetadataKey) {
      // Rule: __metadata__ is an object of strings.
      HG_ST_CHECK(value.is_object(), "'", kMetadataKey,
                  "' must be an object of strings, but it is a ", value.type_name());
      for (const auto& [key, text] : value.items()) {
        HG_ST_CHECK(text.is_string(), "'", kMetadataKey, "' must hold only string values, but '",
                    clip(key), "' is a ", text.type_name());
        result.metadata.emplace(key, text.get<std::string>());
      }
      return;
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
  };
  HeaderReader reader(path, check_entry);
  try {
    Json::sax_parse(header_text, &reader);
  } catch (const nlohmann::json::exception& e) {
    HG_FAIL("safetensors file '", path, "': the header is not valid JSON: ", clip(e.what()));
  }
  reader.finish();

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
  std::vector<Tensor> read(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    read[i] = empty(e.shape, {.dtype = e.dtype});
    if (read[i].nbytes() > 0) read_exact(fd.get(), read[i].data_ptr(), read[i].nbytes(), buffer_start + e.begin, path);
  }

  // Rule: the data matches the integrity hash the writer recorded, if any
  // (Note [Integrity hash] in nn/serialize.h).
  auto recorded = result.metadata.find(kIntegrityKey);
  if (recorded != result.metadata.end()) {
    if (options.verify_integrity) {
      Xxh64 hash;
      for (const Entry* e : by_offset) {
        const Tensor& t = read[static_cast<size_t>(e - entries.data())];
        if (t.nbytes() > 0) hash.update(t.data_ptr(), t.nbytes());
      }
      const std::string computed = hex64(hash.digest());
      HG_ST_CHECK(recorded->second == computed, "the data does not match the integrity hash the writer recorded ",
                  "(metadata '", kIntegrityKey, "' = '", clip(recorded->second), "', the data hashes to '", computed,
                  "'): the file is corrupt (a changed, lost or swapped byte); restore it from a copy, or read it ",
                  "with SafetensorsReadOptions{.verify_integrity = false} if another program changed it on purpose");
    }
    result.metadata.erase(recorded);
  }

  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.dtype == kBool) {
      // Rule: a bool byte is 0 or 1; any other value is undefined behaviour in C++.
      const auto* bytes = static_cast<const uint8_t*>(read[i].data_ptr());
      for (size_t j = 0; j < read[i].nbytes(); ++j) {
        HG_ST_CHECK(bytes[j] <= 1, "entry '", clip(e.name), "' of dtype BOOL holds the byte ",
                    static_cast<int>(bytes[j]), " at element ", j, "; only 0 and 1 are valid");
      }
    }
    result.tensors.emplace_back(e.name, std::move(read[i]));
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
