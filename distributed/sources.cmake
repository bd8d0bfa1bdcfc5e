# distributed/ — floor 6 (above optim/ and amp/): process groups, collectives
# (Gloo), DistributedDataParallel, the cross-rank GradScaler hook.
# docs/distributed.md. Explicit list; add new files here.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/process_group.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tcp_store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ddp.cpp
)
