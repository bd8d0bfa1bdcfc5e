# hg_configure_cuda(target visibility): compile definitions, include paths and
# libraries for the chosen HG_CUDA_MODE. Also makes .cu sources compile as C++
# in the emu build: `g++ -x c++ file.cu` against runtime/emu/include, whose
# headers stand in for cuda_runtime.h, cuda_fp16.h, cublas_v2.h, cudnn.h, ...
function(hg_configure_cuda target visibility)
  if(HG_CUDA_MODE STREQUAL "off")
    return()
  endif()
  target_compile_definitions(${target} ${visibility} HG_WITH_CUDA=1)
  get_target_property(srcs ${target} SOURCES)
  set(cu_srcs "")
  foreach(src IN LISTS srcs)
    if(src MATCHES "\\.cu$")
      list(APPEND cu_srcs ${src})
    endif()
  endforeach()
  if(HG_CUDA_MODE STREQUAL "emu")
    target_compile_definitions(${target} ${visibility} HG_CUDA_EMU=1)
    target_include_directories(${target} ${visibility} $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/emu/include>
                               $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/halfgrad/runtime/emu/include>)
    target_link_libraries(${target} ${visibility} Boost::context)
    if(cu_srcs)
      # -fno-strict-aliasing: kernels view the same bytes as uint4, float4, half
      # and hg::half (128-bit packed loads), which nvcc compiles as intended but
      # g++ may miscompile under strict aliasing.
      set_source_files_properties(${cu_srcs} TARGET_DIRECTORY ${target}
                                  PROPERTIES LANGUAGE CXX
                                  COMPILE_OPTIONS "-xc++;-Wno-unknown-pragmas;-fno-strict-aliasing")
    endif()
  else()  # gpu
    target_link_libraries(${target} ${visibility} CUDA::cudart CUDA::cublas CUDA::cublasLt)
    # cuDNN is called (runtime/cuda/runtime.cpp) but is not part of every CUDA
    # install; HG_CUDNN_INCLUDE_DIR / HG_CUDNN_LIBRARY point elsewhere
    # (scripts/gpu-check does for a pip wheel's or a staged copy).
    find_library(HG_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    find_path(HG_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT HG_CUDNN_LIBRARY OR NOT HG_CUDNN_INCLUDE_DIR)
      message(FATAL_ERROR "cuDNN not found (cudnn.h: ${HG_CUDNN_INCLUDE_DIR}, libcudnn: "
                          "${HG_CUDNN_LIBRARY}); set HG_CUDNN_INCLUDE_DIR and HG_CUDNN_LIBRARY")
    endif()
    target_link_libraries(${target} ${visibility} ${HG_CUDNN_LIBRARY})
    target_include_directories(${target} ${visibility} ${CUDAToolkit_INCLUDE_DIRS} ${HG_CUDNN_INCLUDE_DIR})
    set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  endif()
endfunction()
