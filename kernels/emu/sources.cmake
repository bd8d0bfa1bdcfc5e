# kernels/emu — the device side of the CUDA-on-CPU emulator (fibers, barriers,
# warp ops, launches). emu configuration only; the host runtime shim is listed
# in runtime_sources.cmake.
list(APPEND HG_EMU_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stack_pool.cpp
)
