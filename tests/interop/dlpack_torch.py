#!/usr/bin/env python3
"""DLPack between halfgrad and PyTorch (CPU), through tests/interop/dlpack_shim.cpp.

The same protocol as dlpack_numpy.py, with PyTorch on the other side, which
has bf16: halfgrad's kDLBfloat tensors must arrive as torch.bfloat16 with the
same bits, and torch.bfloat16 tensors must import as halfgrad bf16.

  python3 tests/interop/dlpack_torch.py build/emu/tests/libhg_dlpack_shim.so

Exit 0: passed; 77: skipped (torch is not importable); 1: failed.
"""
import ctypes
import gc
import sys

try:
    import torch
except ImportError:
    print("skipped: torch is not importable by", sys.executable,
          "(configure with -DHG_INTEROP_PYTHON=<a python with torch>)")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])
vp, c_int, c_double, c_char_p = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p
lib.hgshim_last_error.restype = c_char_p
lib.hgshim_export.argtypes = [c_char_p, c_int, ctypes.POINTER(vp), ctypes.POINTER(vp)]
lib.hgshim_fill_exported.argtypes = [c_double]
lib.hgshim_import.argtypes = [vp, c_int, ctypes.POINTER(vp)]
lib.hgshim_imported_layout.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3 + [ctypes.POINTER(c_char_p)]
lib.hgshim_imported_sum.argtypes = [ctypes.POINTER(c_double)]
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype, capsule_new.argtypes = ctypes.py_object, [vp, c_char_p, vp]
capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
capsule_get.restype, capsule_get.argtypes = vp, [ctypes.py_object, c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.restype, capsule_set_name.argtypes = c_int, [ctypes.py_object, c_char_p]
DESTRUCTOR = ctypes.cast(lib.hgshim_capsule_destructor, vp)
NAMES = {False: b"dltensor", True: b"dltensor_versioned"}  # kept alive: capsules keep the pointer
USED_NAMES = {False: b"used_dltensor", True: b"used_dltensor_versioned"}

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8, "bool": torch.bool}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def shim(rc):
    if rc != 0:
        raise RuntimeError(lib.hgshim_last_error().decode())


class HalfgradArray:
    def __init__(self, dtype):
        self.dtype, self.data, self.versioned = dtype, None, False

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.versioned = max_version is not None and max_version[0] >= 1
        managed, data = vp(), vp()
        shim(lib.hgshim_export(self.dtype.encode(), int(self.versioned), ctypes.byref(managed), ctypes.byref(data)))
        self.data = data.value
        return capsule_new(managed, NAMES[self.versioned], DESTRUCTOR)


for name, dtype in DTYPES.items():
    # halfgrad -> torch: the shim's [5, 2] view of arange(24) as [4, 6], transposed, rows 1..5, every second column.
    producer = HalfgradArray(name)
    t = torch.from_dlpack(producer)
    expected = torch.arange(24, dtype=torch.float64).to(dtype).reshape(4, 6).t()[1:6, 0:4:2]
    check(t.dtype == dtype and t.shape == (5, 2) and t.stride() == (1, 12), f"{name}: {t.dtype} {t.shape} {t.stride()}")
    check(t.data_ptr() == producer.data, f"{name}: torch's pointer is not halfgrad's (a copy?)")
    check(torch.equal(t, expected), f"{name}: values {t.tolist()}")
    shim(lib.hgshim_fill_exported(1.0))
    check(bool((t == torch.ones((), dtype=dtype)).all()), f"{name}: torch does not see halfgrad's write")
    lib.hgshim_release_exported()
    del t
    gc.collect()
    check(lib.hgshim_live_exports() == 0, f"{name}: torch did not release the export")

    # torch -> halfgrad: a view with an offset and strides; halfgrad writes, torch sees.
    base = torch.arange(30, dtype=torch.float64).to(dtype).reshape(5, 6)
    a = base[1:, ::2]
    for versioned in (False, True):
        try:
            capsule = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
        except TypeError:
            continue  # a PyTorch without the versioned protocol
        managed = capsule_get(capsule, NAMES[versioned])
        capsule_set_name(capsule, USED_NAMES[versioned])
        data = vp()
        shim(lib.hgshim_import(managed, int(versioned), ctypes.byref(data)))
        check(data.value == a.data_ptr(), f"{name}: halfgrad's pointer is not torch's")
        ndim, sizes, strides, hg_dtype = ctypes.c_int64(), (ctypes.c_int64 * 8)(), (ctypes.c_int64 * 8)(), c_char_p()
        shim(lib.hgshim_imported_layout(ctypes.byref(ndim), sizes, strides, ctypes.byref(hg_dtype)))
        check(hg_dtype.value.decode() == name, f"{name}: imported as {hg_dtype.value}")
        check(list(strides[:ndim.value]) == list(a.stride()), f"{name}: strides {list(strides[:ndim.value])}")
        total = c_double()
        shim(lib.hgshim_imported_sum(ctypes.byref(total)))
        check(total.value == a.double().sum().item(), f"{name}: sum {total.value} != {a.double().sum().item()}")
        if name != "bool":
            before = a.double().clone()
            shim(lib.hgshim_imported_affine())
            check(torch.equal(a.double(), (before * 2 + 1).to(dtype).double()), f"{name}: torch does not see the write")
            base.copy_(torch.arange(30, dtype=torch.float64).to(dtype).reshape(5, 6))
        del capsule
        lib.hgshim_release_imported()
    print(f"halfgrad <-> torch {name}: zero copy both ways, strides and offset kept")

print(f"PyTorch {torch.__version__}: {'FAILED' if failures else 'passed'}")
sys.exit(1 if failures else 0)
