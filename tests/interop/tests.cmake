# Interop with other libraries: DLPack (runtime/dlpack.h) and Hugging Face
# GPT-2 checkpoints (nn/models/gpt_hf.cpp).
hg_add_test(test_interop LABEL interop ARGS "~[cuda]~[.]" SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_dlpack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_hf_gpt2.cpp
)
target_compile_definitions(test_interop PRIVATE HG_INTEROP_FIXTURE_DIR="${CMAKE_CURRENT_LIST_DIR}/fixtures")
# The [cuda] cases: kDLCUDA tensors and the stream contract, skipped where
# there is no CUDA device (always there under cuda-emu).
if(NOT HG_CUDA_MODE STREQUAL "off")
  add_test(NAME test_interop_cuda COMMAND test_interop "[cuda]")
  set_tests_properties(test_interop_cuda PROPERTIES LABELS interop)
  hg_test_requires(test_interop_cuda cuda)
endif()

# hg_interop_python(<var> <module>): the first interpreter that imports
# <module>, from HG_INTEROP_PYTHON (a venv with NumPy 2 / torch, say), the
# python3 CMake found, then Debian's /usr/bin/python3 (python3-numpy, which
# ./run installs); the found python3 when none does (the test then reports
# itself skipped). Decided at configure time.
set(HG_INTEROP_PYTHON "$ENV{HG_INTEROP_PYTHON}" CACHE FILEPATH "Python for the interop tests (NumPy, torch, transformers)")
find_package(Python3 COMPONENTS Interpreter)
function(hg_interop_python var module)
  foreach(py IN ITEMS ${HG_INTEROP_PYTHON} ${Python3_EXECUTABLE} /usr/bin/python3)
    if(EXISTS "${py}")
      execute_process(COMMAND "${py}" -c "import ${module}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(${var} "${py}" PARENT_SCOPE)
        return()
      endif()
    endif()
  endforeach()
  set(${var} "${Python3_EXECUTABLE}" PARENT_SCOPE)
endfunction()

# DLPack with NumPy: dlpack_numpy.py loads the C-ABI shim (dlpack_shim.cpp)
# with ctypes and exchanges tensors through NumPy's own DLPack protocol. Skipped
# (exit 77) where NumPy is not importable. Not in sanitizer builds: an
# ASan-instrumented shim cannot be loaded into an uninstrumented interpreter
# (the C++ lifetime tests above run under ASan instead).
if(Python3_FOUND AND NOT HG_SANITIZE)
  hg_interop_python(hg_numpy_python numpy)
  add_library(hg_dlpack_shim MODULE ${CMAKE_CURRENT_LIST_DIR}/dlpack_shim.cpp)
  target_link_libraries(hg_dlpack_shim PRIVATE halfgrad ${CMAKE_DL_LIBS})
  hg_target_warnings(hg_dlpack_shim)
  hg_configure_cuda(hg_dlpack_shim PRIVATE)
  add_test(NAME dlpack_numpy
           COMMAND ${hg_numpy_python} ${CMAKE_CURRENT_LIST_DIR}/dlpack_numpy.py $<TARGET_FILE:hg_dlpack_shim>)
  set_tests_properties(dlpack_numpy PROPERTIES LABELS interop SKIP_RETURN_CODE ${HG_TEST_SKIP_RETURN_CODE})
  # The same with PyTorch (bf16 included), where torch is importable.
  hg_interop_python(hg_dlpack_torch_python torch)
  add_test(NAME dlpack_torch
           COMMAND ${hg_dlpack_torch_python} ${CMAKE_CURRENT_LIST_DIR}/dlpack_torch.py $<TARGET_FILE:hg_dlpack_shim>)
  set_tests_properties(dlpack_torch PROPERTIES LABELS interop SKIP_RETURN_CODE ${HG_TEST_SKIP_RETURN_CODE})
else()
  foreach(name dlpack_numpy dlpack_torch)
    add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "${name} skipped: sanitizer build or no python3")
    set_tests_properties(${name} PROPERTIES LABELS interop SKIP_REGULAR_EXPRESSION "${name} skipped")
  endforeach()
endif()

# PyTorch round trips (tests/interop/torch_roundtrip.py): `torch` needs torch
# and safetensors, `hf` also transformers. ./run test installs none of them
# (torch is gigabytes): where the interpreter cannot import them the tests
# report SKIPPED with the missing module, never passed. Point
# HG_INTEROP_PYTHON (CMake cache or environment at configure time) at a
# Python that has them to run them.
if(Python3_FOUND)
  hg_interop_python(hg_torch_python torch)
  foreach(mode torch hf)
    add_test(NAME ${mode}_roundtrip
             COMMAND ${hg_torch_python} ${CMAKE_CURRENT_LIST_DIR}/torch_roundtrip.py ${mode}
                     $<TARGET_FILE:test_interop> $<TARGET_FILE:test_nn> ${CMAKE_CURRENT_BINARY_DIR}/${mode}_roundtrip)
    set_tests_properties(${mode}_roundtrip PROPERTIES LABELS interop SKIP_RETURN_CODE ${HG_TEST_SKIP_RETURN_CODE})
  endforeach()
endif()

# The check that always runs: tests/interop/safetensors_layout.py, Python's
# standard library only (json + struct), reads transformers' own GPT-2 file
# (the fixture) and halfgrad's export of it and checks they have the same
# layout: names, dtypes, Conv1D [in, out] shapes, bytes, header rules.
if(Python3_FOUND)
  add_test(NAME safetensors_layout
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/safetensors_layout.py
                   $<TARGET_FILE:test_interop> ${CMAKE_CURRENT_LIST_DIR}/fixtures/hf_gpt2_tiny
                   ${CMAKE_CURRENT_BINARY_DIR}/safetensors_layout)
  set_tests_properties(safetensors_layout PROPERTIES LABELS interop)
endif()
