# runtime/ — floor 1, under kernels/: what the kernels run on.
#   cpu/ (HG_SOURCES)    : the CPU runtime (threads, ISA decisions, oneDNN handles)
#   HG_SOURCES           : dlpack.cpp — tensors to and from other libraries (DLPack),
#                          every configuration (its CUDA stream part under HG_WITH_CUDA)
#   HG_CUDA_HOST_SOURCES : cuda/ — the CUDA runtime layer (streams, events, error
#                          checks, the caching allocator, the cuBLAS/cuDNN handles)
#   HG_EMU_SOURCES       : emu/ — the CUDA-on-CPU emulator (emu configuration only)
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/dlpack.cpp
)
list(APPEND HG_CUDA_HOST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cuda/cuda_check.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/runtime.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/caching_allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/profiler_clock.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/device_table.cpp
)
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/emu/sources.cmake)
