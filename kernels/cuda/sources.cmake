# kernels/cuda — machinery the CUDA kernels of every family share (launch
# helpers, block and row reductions, device math, the mma.sync tiles) and the
# device-side error flag; the runtime layer under them is runtime/cuda.
# Host C++: the hooks that plug the CUDA backend into core/ (allocation, copies,
# the device-side error flag, whose records name kernels/op_list.h's ops, which
# is why they live on this floor and not in runtime/cuda).
list(APPEND HG_CUDA_HOST_SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_hooks.cpp)
# .cu files (nvcc in gpu, g++ -x c++ in emu):
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_error.cu)
