# kernels/amp_scale — the GradScaler's overflow check and unscale (amp/grad_scaler.cpp uses them).
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/amp_scale_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/amp_scale_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/amp_scale.cu)
# The check and unscale loops (an integer OR over the lanes) vectorise only at -O3.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/amp_scale_cpu.cpp PROPERTIES COMPILE_OPTIONS "-O3")
