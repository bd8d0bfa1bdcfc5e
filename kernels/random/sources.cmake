# kernels/random — uniform_, normal_ and bernoulli_ from the counter-based Philox generator.
list(APPEND HG_SOURCES ${CMAKE_CURRENT_LIST_DIR}/random_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/random_cpu.cpp)
list(APPEND HG_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/random.cu)
