# kernels/attention — scaled dot-product attention: the math path, the fused
# (flash) kernels and the cuDNN graph path.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/attention_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/attention_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flash_attention_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/flash_attention_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_cudnn_ops.cpp
)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/attention.cu ${CMAKE_CURRENT_LIST_DIR}/flash_attention.cu)
# The cuDNN fused-attention graph (host C++ over the cuDNN frontend).
list(APPEND HG_CUDA_HOST_SOURCES ${CMAKE_CURRENT_LIST_DIR}/attention_cudnn.cpp)
# The blocked flash attention tiles, one file per ISA as for the vector math
# (flash_attention_tiles.h); -O3 for the register blocks.
if(HG_HAVE_SLEEF)
  list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/flash_attention_sse2.cpp ${CMAKE_CURRENT_LIST_DIR}/flash_attention_avx2.cpp ${CMAKE_CURRENT_LIST_DIR}/flash_attention_avx512.cpp)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/flash_attention_sse2.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/flash_attention_avx2.cpp PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx2;-mfma")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/flash_attention_avx512.cpp
                              PROPERTIES COMPILE_OPTIONS "-fno-math-errno;-O3;-mavx512f;-mavx2;-mfma")
endif()
