# distributed/ — floor 6, beside amp/ (above optim/): process groups,
# collectives (Gloo; NCCL in gpu builds), DistributedDataParallel, the
# cross-rank GradScaler hook. docs/distributed.md. Explicit list; add new files here.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/process_group.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tcp_store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ddp.cpp
)
# The NCCL backend: gpu builds only (the emulator cannot run NCCL), when the
# CUDA toolkit (or HG_NCCL_ROOT) has nccl.h and libnccl. The top-level
# CMakeLists links HG_NCCL_LIBRARY and defines HG_HAVE_NCCL when found.
set(HG_NCCL_LIBRARY "")
if(HG_CUDA_MODE STREQUAL "gpu")
  find_path(HG_NCCL_INCLUDE_DIR nccl.h HINTS ${HG_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(HG_NCCL_LIB nccl HINTS ${HG_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64
               /usr/local/cuda/lib)
  if(HG_NCCL_INCLUDE_DIR AND HG_NCCL_LIB)
    message(STATUS "NCCL: ${HG_NCCL_LIB} (backend \"nccl\" enabled)")
    set(HG_NCCL_LIBRARY ${HG_NCCL_LIB})
    list(APPEND HG_CUDA_HOST_SOURCES ${CMAKE_CURRENT_LIST_DIR}/nccl_process_group.cpp)
  else()
    message(STATUS "NCCL not found (nccl.h: ${HG_NCCL_INCLUDE_DIR}, libnccl: ${HG_NCCL_LIB}): no \"nccl\" backend")
  endif()
endif()
