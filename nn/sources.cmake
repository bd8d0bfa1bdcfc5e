# nn/ — floor 4: modules, layers, init, functional, safetensors. Explicit list; add new files here.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/module.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/transformer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init.cpp
  ${CMAKE_CURRENT_LIST_DIR}/functional.cpp
  ${CMAKE_CURRENT_LIST_DIR}/serialize.cpp
  ${CMAKE_CURRENT_LIST_DIR}/models/gpt.cpp
  ${CMAKE_CURRENT_LIST_DIR}/models/gpt_hf.cpp
  ${CMAKE_CURRENT_LIST_DIR}/models/cnn.cpp
  ${CMAKE_CURRENT_LIST_DIR}/models/mlp.cpp
)
