# kernels/conv — conv2d, pooling and batch norm (the CNN ops).
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/conv_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/conv_cpu.cpp ${CMAKE_CURRENT_LIST_DIR}/pool_norm_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/conv.cu ${CMAKE_CURRENT_LIST_DIR}/pool_norm.cu)
# The oneDNN convolution, when the build has oneDNN (CMakeLists.txt, HG_WITH_ONEDNN).
if(HG_WITH_ONEDNN)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/conv_onednn.cpp)
endif()
# The pooling and batch-norm loops vectorise only at -O3: at -O2 the 2x2
# max-pool's selects compiled into branches that mispredict on random data.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/pool_norm_cpu.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
