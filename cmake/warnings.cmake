# Warnings and sanitizers, applied per target.
set(HG_CXX_WARNINGS -Wall -Wextra -Wpedantic -Wshadow=local -Wno-unused-parameter)

function(hg_target_warnings target)
  foreach(flag IN LISTS HG_CXX_WARNINGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${flag}>)
  endforeach()
  if(HG_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
  if(HG_CUDA_MODE STREQUAL "gpu")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  endif()
endfunction()

if(HG_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(HG_ENABLE_DCHECK=1)
endif()
