#!/usr/bin/env python3
"""DLPack between halfgrad and NumPy, through tests/interop/dlpack_shim.cpp.

halfgrad has no Python bindings, so this script loads a small C-ABI shim over
runtime/dlpack.h with ctypes and speaks NumPy's own DLPack protocol to it:

  halfgrad -> NumPy   an object whose __dlpack__ returns a PyCapsule named
                      "dltensor" (or "dltensor_versioned" when NumPy asks with
                      max_version >= (1, 0)) around hg::to_dlpack[_versioned];
                      np.from_dlpack consumes it.
  NumPy -> halfgrad   ndarray.__dlpack__() (and max_version=(1, 0) where NumPy
                      has it); the capsule is renamed "used_dltensor[_versioned]"
                      (the consumer's duty) and handed to hg::from_dlpack.

Checked: the same data pointer on both sides (zero copy), the strides and the
offset of a non-contiguous view, the values against NumPy's own arange, writes
through one side seen by the other, every dtype both have (NumPy has no bf16:
it must refuse halfgrad's kDLBfloat tensor, and the refused capsule is freed),
and every export released exactly once (the shim counts deleter calls).

  python3 tests/interop/dlpack_numpy.py build/emu/tests/libhg_dlpack_shim.so

Exit 0: passed; 77: skipped (NumPy is not importable, or too old for DLPack);
1: failed.
"""
import ctypes
import gc
import sys

SKIP = 77

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not importable by", sys.executable)
    sys.exit(SKIP)
if not hasattr(np, "from_dlpack"):
    print(f"skipped: NumPy {np.__version__} has no DLPack support (needs 1.22 or later)")
    sys.exit(SKIP)

lib = ctypes.CDLL(sys.argv[1])
vp, c_int, c_double, c_char_p = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p
lib.hgshim_last_error.restype = c_char_p
lib.hgshim_export.argtypes = [c_char_p, c_int, ctypes.POINTER(vp), ctypes.POINTER(vp)]
lib.hgshim_fill_exported.argtypes = [c_double]
lib.hgshim_import.argtypes = [vp, c_int, ctypes.POINTER(vp)]
lib.hgshim_imported_layout.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3 + [ctypes.POINTER(c_char_p)]
lib.hgshim_imported_sum.argtypes = [ctypes.POINTER(c_double)]

capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [vp, c_char_p, vp]
capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
capsule_get.restype = vp
capsule_get.argtypes = [ctypes.py_object, c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.restype = c_int
capsule_set_name.argtypes = [ctypes.py_object, c_char_p]
DESTRUCTOR = ctypes.cast(lib.hgshim_capsule_destructor, vp)
# PyCapsule_New and PyCapsule_SetName keep the name's pointer, not a copy:
# the names live here, for the life of the process.
NAMES = {False: b"dltensor", True: b"dltensor_versioned"}
USED_NAMES = {False: b"used_dltensor", True: b"used_dltensor_versioned"}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def shim(rc):
    if rc != 0:
        raise RuntimeError(lib.hgshim_last_error().decode())


# NumPy names of halfgrad's dtypes that NumPy also has.
DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
          "i32": np.int32, "u8": np.uint8, "bool": np.bool_}
# kDLBool came with DLPack 0.8; NumPy before 1.25 exchanges no bool tensors,
# not even with itself. Then bool is left out here (the C++ tests cover it).
try:
    np.from_dlpack(np.zeros(2, dtype=np.bool_))
except (BufferError, RuntimeError, TypeError) as e:
    print(f"NumPy {np.__version__} exchanges no bool tensors through DLPack ({e}): bool left out")
    del DTYPES["bool"]


class HalfgradArray:
    """A producer object in DLPack's Python protocol, backed by the shim."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.data = None
        self.asked_versioned = False

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None and stream != -1:
            raise BufferError("a CPU tensor takes no stream")
        versioned = max_version is not None and max_version[0] >= 1
        self.asked_versioned = versioned
        managed, data = vp(), vp()
        shim(lib.hgshim_export(self.dtype.encode(), int(versioned), ctypes.byref(managed), ctypes.byref(data)))
        self.data = data.value
        return capsule_new(managed, NAMES[versioned], DESTRUCTOR)


def halfgrad_to_numpy():
    for name, np_dtype in DTYPES.items():
        producer = HalfgradArray(name)
        a = np.from_dlpack(producer)
        # The shim's view: arange(24) as [4, 6], transposed, rows 1..5, every second column.
        expected = np.arange(24, dtype=np.float64).astype(np_dtype).reshape(4, 6).T[1:6, 0:4:2]
        itemsize = np.dtype(np_dtype).itemsize
        check(a.dtype == np_dtype, f"{name}: NumPy dtype {a.dtype}")
        check(a.shape == (5, 2), f"{name}: shape {a.shape}")
        check(a.strides == (1 * itemsize, 12 * itemsize), f"{name}: strides {a.strides}")
        check(a.ctypes.data == producer.data, f"{name}: NumPy's pointer {a.ctypes.data:#x} != halfgrad's "
                                              f"{producer.data:#x} (a copy?)")
        check(np.array_equal(a, expected), f"{name}: values {a.tolist()} != {expected.tolist()}")
        shim(lib.hgshim_fill_exported(1.0))  # written by halfgrad, read by NumPy: the same memory
        check(np.all(a == np.ones((), np_dtype)), f"{name}: NumPy does not see halfgrad's write")
        lib.hgshim_release_exported()  # halfgrad drops its handle first; NumPy's view keeps the memory
        check(np.all(a == np.ones((), np_dtype)), f"{name}: values changed after halfgrad let go")
        print(f"halfgrad -> NumPy {name}: zero copy, strides {a.strides}, "
              f"{'versioned' if producer.asked_versioned else 'legacy'} capsule")
        del a
        gc.collect()
        check(lib.hgshim_live_exports() == 0, f"{name}: NumPy did not release the export")

    # bf16 has no NumPy dtype: NumPy refuses the capsule, whose destructor frees the export.
    try:
        np.from_dlpack(HalfgradArray("bf16"))
        check(False, "bf16: NumPy accepted a kDLBfloat tensor")
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        print(f"halfgrad -> NumPy bf16: refused by NumPy as expected ({type(e).__name__}: {e})")
    gc.collect()
    check(lib.hgshim_live_exports() == 0, "bf16: the refused export was not freed")


def import_capsule(capsule, versioned):
    managed = capsule_get(capsule, NAMES[versioned])
    capsule_set_name(capsule, USED_NAMES[versioned])  # ours now: NumPy's capsule destructor leaves it alone
    data = vp()
    rc = lib.hgshim_import(managed, int(versioned), ctypes.byref(data))
    return rc, data.value


def numpy_to_halfgrad(versioned):
    kind = "versioned" if versioned else "legacy"
    for name, np_dtype in DTYPES.items():
        base = np.arange(30, dtype=np.float64).astype(np_dtype).reshape(5, 6)
        a = base[1:, ::2]  # offset 6 elements, strides (6, 2) elements
        capsule = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
        rc, data = import_capsule(capsule, versioned)
        if rc != 0:
            check(False, f"{name} ({kind}): import failed: {lib.hgshim_last_error().decode()}")
            continue
        check(data == a.ctypes.data, f"{name} ({kind}): halfgrad's pointer is not NumPy's (a copy?)")
        ndim, sizes, strides = ctypes.c_int64(), (ctypes.c_int64 * 8)(), (ctypes.c_int64 * 8)()
        dtype = c_char_p()
        shim(lib.hgshim_imported_layout(ctypes.byref(ndim), sizes, strides, ctypes.byref(dtype)))
        itemsize = np.dtype(np_dtype).itemsize
        check(dtype.value.decode() == name, f"{name} ({kind}): halfgrad dtype {dtype.value}")
        check(list(sizes[:ndim.value]) == list(a.shape), f"{name} ({kind}): sizes {list(sizes[:ndim.value])}")
        check([s * itemsize for s in strides[:ndim.value]] == list(a.strides),
              f"{name} ({kind}): strides {list(strides[:ndim.value])}")
        total = c_double()
        shim(lib.hgshim_imported_sum(ctypes.byref(total)))
        check(total.value == float(a.astype(np.float64).sum()), f"{name} ({kind}): sum {total.value}")
        if name != "bool":
            before = a.astype(np.float64).copy()
            shim(lib.hgshim_imported_affine())  # written by halfgrad into NumPy's memory
            check(np.array_equal(a.astype(np.float64), (before * 2 + 1).astype(np_dtype).astype(np.float64)),
                  f"{name} ({kind}): NumPy does not see halfgrad's write")
            check(base[0, 0] == 0 and base[1, 1] == 7, f"{name} ({kind}): halfgrad wrote outside the view")
        del capsule
        lib.hgshim_release_imported()  # NumPy's deleter runs now
        print(f"NumPy -> halfgrad {name} ({kind}): zero copy, strides and offset kept")

    if versioned:
        # A read-only array carries DLPACK_FLAG_BITMASK_READ_ONLY: refused, and freed.
        ro = np.arange(4.0)
        ro.flags.writeable = False
        rc, _ = import_capsule(ro.__dlpack__(max_version=(1, 0)), True)
        check(rc != 0 and "read-only" in lib.hgshim_last_error().decode(), "read-only array was accepted")
        print("NumPy -> halfgrad read-only: refused as expected")


def numpy_has_versioned():
    try:
        np.arange(1.0).__dlpack__(max_version=(1, 0))
        return True
    except TypeError:
        return False


halfgrad_to_numpy()
numpy_to_halfgrad(versioned=False)
if numpy_has_versioned():
    numpy_to_halfgrad(versioned=True)
else:
    print(f"NumPy {np.__version__} has no versioned DLPack export (NumPy 2.1+): the versioned import is covered "
          "by the C++ tests only")
print(f"NumPy {np.__version__}: {'FAILED' if failures else 'passed'}")
sys.exit(1 if failures else 0)
