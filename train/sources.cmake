# train/ — floor 7: the training loop as a library (hg::train): precision modes,
# the run folder, metrics.jsonl and curves.svg, the progress line. Explicit list;
# add new files here.
list(APPEND HG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/run_folder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/terminal.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resume.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer.cpp
)
