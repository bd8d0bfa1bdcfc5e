# amp/ — floor 6: the GradScaler, plus its kernels and the floor-2 policy
# table, listed here so that the kernels/ lists stay untouched by this module.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/grad_scaler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../autograd/autocast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../kernels/amp_policy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../kernels/amp_scale/amp_scale_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../kernels/amp_scale/amp_scale_cpu.cpp
)
list(APPEND HG_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/../kernels/amp_scale/amp_scale.cu
)
