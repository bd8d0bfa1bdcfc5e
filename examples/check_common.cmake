# What the hg-train ctest scripts share (included by check_resume*.cmake).
#
# train(<expect_ok> args...): runs ${HG_TRAIN} args...; with expect_ok TRUE a
# non-zero exit fails the test. Sets last_out (word-wrapped continuation lines
# joined), last_err and last_rc in the caller.
function(train expect_ok)
  execute_process(COMMAND "${HG_TRAIN}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_ok AND NOT rc EQUAL 0)
    message(FATAL_ERROR "hg-train ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  # hg-train word-wraps its messages to 80 columns: join the continuation lines.
  string(REGEX REPLACE "\n  +" " " out "${out}")
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
  set(last_rc "${rc}" PARENT_SCOPE)
endfunction()

# The checkpoints of the uninterrupted run (<WORK>/full) and the stopped and
# resumed one (<WORK>/split) must be byte-identical.
function(require_same_checkpoints)
  file(SHA256 "${WORK}/full/checkpoint.safetensors" full_hash)
  file(SHA256 "${WORK}/split/checkpoint.safetensors" split_hash)
  if(NOT full_hash STREQUAL split_hash)
    message(FATAL_ERROR "the resumed run's checkpoint differs from the uninterrupted run's")
  endif()
endfunction()
