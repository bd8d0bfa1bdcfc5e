# data/ — floor 5: datasets, loaders, file formats. Explicit list; add new files here.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/idx.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fashion_mnist.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dataloader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/prefetch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/npy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text.cpp
)
