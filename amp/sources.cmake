# amp/ — floor 6: the GradScaler and fp8 training, plus autocast and the floor-2
# policy table (its kernels are the kernels/amp_scale family).
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/grad_scaler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../autograd/autocast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../kernels/amp_policy.cpp
)
