# optim/ — floor 5.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lr_scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clip_grad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/foreach.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lion.cpp
  ${CMAKE_CURRENT_LIST_DIR}/make_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/muon.cpp
  ${CMAKE_CURRENT_LIST_DIR}/state_check.cpp
)
