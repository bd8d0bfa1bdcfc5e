# kernels/emu — the host runtime shim (CUDA runtime API on the CPU) and the CPU
# stand-ins for cuBLAS/cuBLASLt/cuDNN. emu configuration only; the device side
# (fibers, built-ins, launches) is listed in sources.cmake.
list(APPEND HG_EMU_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_stream.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_cublas.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_cudnn.cpp
)
