// A small C ABI over runtime/dlpack.h for tests/interop/dlpack_numpy.py, which
// loads it with ctypes and exchanges tensors with NumPy's DLPack protocol
// (np.from_dlpack, ndarray.__dlpack__). Test code, not part of the library:
// halfgrad itself has no Python bindings.
//
// Every function returns 0 on success and -1 on an hg::Error, whose text
// hgshim_last_error() returns.
#include <dlfcn.h>

#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <string>

#include "autograd/functions.h"
#include "core/tensor.h"
#include "runtime/dlpack.h"

namespace {

std::string g_error;
hg::Tensor g_exported;  // the base tensor of the last export (the export is a view of it)
hg::Tensor g_imported;  // the last import
int g_live = 0;         // exports whose deleter has not run yet
std::mutex g_mutex;
std::map<void*, void (*)(DLManagedTensor*)> g_legacy_deleters;
std::map<void*, void (*)(DLManagedTensorVersioned*)> g_versioned_deleters;

// The exports' deleters, wrapped to count: the script checks that NumPy
// released every tensor it consumed (a second call would be a double free).
void counting_legacy_deleter(DLManagedTensor* m) {
  void (*inner)(DLManagedTensor*) = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    inner = g_legacy_deleters.at(m);
    g_legacy_deleters.erase(m);
    --g_live;
  }
  inner(m);
}

void counting_versioned_deleter(DLManagedTensorVersioned* m) {
  void (*inner)(DLManagedTensorVersioned*) = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    inner = g_versioned_deleters.at(m);
    g_versioned_deleters.erase(m);
    --g_live;
  }
  inner(m);
}

template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception& e) {
    g_error = e.what();
    return -1;
  }
}

}  // namespace

extern "C" {

const char* hgshim_last_error() { return g_error.c_str(); }

int hgshim_live_exports() { return g_live; }

// arange(24) in `dtype` (hg::dtype_from_name spelling) as [4, 6], transposed,
// rows 1..5 of it, every second column: a [5, 2] view at element offset 1
// with strides [1, 12]. Writes the DLManagedTensor(Versioned) and its data
// pointer.
int hgshim_export(const char* dtype, int versioned, void** managed, void** data) {
  return guarded([&] {
    const hg::DType t = hg::dtype_from_name(dtype);
    g_exported = hg::arange(24.0, {.dtype = hg::kF64}).to(t).view({4, 6});
    const hg::Tensor view = g_exported.t().slice(0, 1, 6).slice(1, 0, 4, 2);
    *data = view.data_ptr();
    std::lock_guard<std::mutex> lock(g_mutex);
    if (versioned != 0) {
      DLManagedTensorVersioned* m = hg::to_dlpack_versioned(view);
      g_versioned_deleters[m] = m->deleter;
      m->deleter = &counting_versioned_deleter;
      *managed = m;
    } else {
      DLManagedTensor* m = hg::to_dlpack(view);
      g_legacy_deleters[m] = m->deleter;
      m->deleter = &counting_legacy_deleter;
      *managed = m;
    }
    ++g_live;
  });
}

// Fills the last export's base tensor through halfgrad (NumPy's view of it must see the value).
int hgshim_fill_exported(double value) {
  return guarded([&] { g_exported.fill_(value); });
}

void hgshim_release_exported() { g_exported = hg::Tensor(); }

// Imports a DLManagedTensor(Versioned) NumPy made; always takes ownership
// (the caller renamed the capsule to used_dltensor[_versioned] first).
int hgshim_import(void* managed, int versioned, void** data) {
  return guarded([&] {
    g_imported = versioned != 0 ? hg::from_dlpack(static_cast<DLManagedTensorVersioned*>(managed))
                                : hg::from_dlpack(static_cast<DLManagedTensor*>(managed));
    *data = g_imported.data_ptr();
  });
}

// The import's rank, sizes and strides (up to 8 dims) and dtype name.
int hgshim_imported_layout(int64_t* ndim, int64_t* sizes, int64_t* strides, const char** dtype) {
  return guarded([&] {
    HG_CHECK(g_imported.dim() <= 8, "hgshim_imported_layout: more than 8 dims");
    *ndim = g_imported.dim();
    for (int64_t d = 0; d < g_imported.dim(); ++d) {
      sizes[d] = g_imported.size(d);
      strides[d] = g_imported.stride(d);
    }
    static std::string name;
    name = std::string(hg::dtype_name(g_imported.dtype()));
    *dtype = name.c_str();
  });
}

// Sum of the import in f64, computed by halfgrad.
int hgshim_imported_sum(double* out) {
  return guarded([&] { *out = g_imported.to(hg::kF64).sum().item<double>(); });
}

// import = import * 2 + 1, written in place through halfgrad.
int hgshim_imported_affine() {
  return guarded([&] {
    const hg::Tensor d = g_imported.to(hg::kF64);
    g_imported.copy_(
        hg::add(hg::mul(d, hg::scalar_tensor(2.0, {.dtype = hg::kF64})), hg::scalar_tensor(1.0, {.dtype = hg::kF64})));
  });
}

// Drops the import: the producer's (NumPy's) deleter runs now.
void hgshim_release_imported() { g_imported = hg::Tensor(); }

// A PyCapsule destructor (the capsule as void*): frees a DLManagedTensor
// nobody consumed, as the DLPack Python spec asks of the producer. The
// Python C API is looked up in the running interpreter, so the shim needs no
// Python headers.
void hgshim_capsule_destructor(void* capsule) {
  using IsValid = int (*)(void*, const char*);
  using GetPointer = void* (*)(void*, const char*);
  static auto is_valid = reinterpret_cast<IsValid>(dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
  static auto get_pointer = reinterpret_cast<GetPointer>(dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
  if (is_valid == nullptr || get_pointer == nullptr) return;
  if (is_valid(capsule, "dltensor") != 0) {
    auto* m = static_cast<DLManagedTensor*>(get_pointer(capsule, "dltensor"));
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  } else if (is_valid(capsule, "dltensor_versioned") != 0) {
    auto* m = static_cast<DLManagedTensorVersioned*>(get_pointer(capsule, "dltensor_versioned"));
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  }
}

}  // extern "C"
