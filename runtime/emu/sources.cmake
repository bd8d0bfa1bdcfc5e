# runtime/emu — the CUDA-on-CPU emulator (emu configuration only).
# Device side (fibers, barriers, warp ops, launches):
list(APPEND HG_EMU_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stack_pool.cpp
)
# The host runtime shim (CUDA runtime API on the CPU) and the CPU stand-ins for
# cuBLAS/cuBLASLt/cuDNN:
list(APPEND HG_EMU_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_stream.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_cublas.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_cudnn.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_cudnn_graph.cpp
)
