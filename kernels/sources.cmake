# kernels/ — floor 1. Explicit lists; add new files here.
#   HG_SOURCES           : CPU kernels (every configuration)
#   HG_CUDA_HOST_SOURCES : host C++ of the CUDA backend (runtime layer, allocator)
#   HG_CUDA_SOURCES      : .cu kernel files
#   HG_EMU_SOURCES       : the CUDA-on-CPU emulator (emu configuration only)
include(${CMAKE_CURRENT_LIST_DIR}/cpu/sources.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/cuda/sources.cmake OPTIONAL)   # runtime layer
include(${CMAKE_CURRENT_LIST_DIR}/cuda/kernels.cmake OPTIONAL)   # .cu kernels
include(${CMAKE_CURRENT_LIST_DIR}/emu/sources.cmake OPTIONAL)          # device side
include(${CMAKE_CURRENT_LIST_DIR}/emu/runtime_sources.cmake OPTIONAL)  # host runtime shim
