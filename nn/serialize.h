// Checkpoints as safetensors files: the format PyTorch's `safetensors` package reads.
//
// Layout (all integers little-endian):
//   [8 bytes]  u64 N, the header length
//   [N bytes]  UTF-8 JSON object, padded with spaces so the buffer starts 8-aligned:
//              {"__metadata__": {"step": "100"},
//               "fc1.weight": {"dtype": "F16", "shape": [128, 784], "data_offsets": [0, 200704]},
//               ...}
//   [rest]     the byte buffer; data_offsets are [begin, end) relative to its start
// dtype names: F64 F32 F16 BF16 I64 I32 U8 BOOL (halfgrad's eight dtypes).
//
// Writing is atomic: the bytes go to a temp file next to `path`, are fsync'ed,
// and the temp file is renamed over `path` (then the folder is fsync'ed). A save
// that fails or is killed leaves any earlier file at `path` as it was.
//
// Reading trusts nothing in the file: every rule of the format is checked
// before any allocation depends on a size read from it, and a violation throws
// hg::Error naming the file and the rule (see docs/checkpoints.md for the list).
//
//   hg::nn::save_safetensors("model.safetensors", {{"w", w}, {"b", b}}, {{"step", "10"}});
//   hg::nn::SafetensorsFile f = hg::nn::load_safetensors("model.safetensors");
//   hg::Tensor w2 = f.at("w");   // a CPU tensor
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace hg::nn {

// The header may not exceed this many bytes (same bound as the reference reader),
// so a corrupt length field cannot make us allocate gigabytes.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The safetensors name of a dtype ("F16", "BOOL", ...) and back; the parse
// returns nullopt for names halfgrad has no dtype for.
std::string_view safetensors_dtype_name(DType dtype);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);

// Writes `tensors` (any device, any strides: copied to contiguous CPU memory)
// in the given order, plus string metadata. Names must be non-empty, unique and
// not "__metadata__". Throws hg::Error on any failure, leaving `path` untouched.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A loaded file: CPU tensors in header order, and the metadata.
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;

  bool contains(std::string_view name) const;
  // The tensor called `name`; throws hg::Error listing the names present if absent.
  const Tensor& at(std::string_view name) const;
};

// Note [Integrity hash]
// save_safetensors records the XXH64 (core/hash.h) of the whole data section
// as the metadata entry "halfgrad.data_xxh64" (16 hex digits). The reader
// recomputes it over the bytes it read and refuses a mismatch, so a flipped
// byte in a tensor (which every structural rule lets through) is caught; it
// then drops the entry from SafetensorsFile::metadata (it describes the file,
// not the model). Files without the entry (PyTorch's, other programs') load
// as before; verify_integrity = false skips the check, e.g. for a foreign
// file that copied the entry but changed the data.
inline constexpr const char* kIntegrityKey = "halfgrad.data_xxh64";

struct SafetensorsReadOptions {
  bool verify_integrity = true;
};

// Reads and validates a whole file. Throws hg::Error naming the file and the
// rule the file breaks.
SafetensorsFile load_safetensors(const std::string& path, const SafetensorsReadOptions& options = {});

class Module;

// Model-only export: module.state_dict() under its own names ("0.weight",
// "fc1.bias": PyTorch's state_dict keys for the same architecture, no
// "model." prefix), so PyTorch loads it with
//   model.load_state_dict(safetensors.torch.load_file("model.safetensors"))
// (tests/nn/torch_state_dict.py checks this). Training checkpoints
// (optim/checkpoint.h) hold more and prefix the model's keys.
void save_state_dict(const std::string& path, const Module& module,
                     const std::map<std::string, std::string>& metadata = {});
// Loads such a file (or one PyTorch's save_file wrote from a state_dict) into
// `module` in place; strict as in Module::load_state_dict.
void load_state_dict(const std::string& path, Module& module, bool strict = true);

}  // namespace hg::nn
