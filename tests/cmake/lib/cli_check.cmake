# One k3host run checked by exit code and output, for the CLI tests in tests/cmake/*.cmake.
#
# Included (not in script mode) it defines
#   k3_cli_test(NAME CODE ARGS <args...> [STDOUT regex] [STDERR regex]
#               [STDOUT_NOT regex] [STDERR_NOT regex])
# which registers a ctest test that runs k3host from the source folder. Run as
#   cmake -DEXE=k3host -DARGS="--config|f.yaml" -DCODE=2 [-DSTDERR=regex] ... -P cli_check.cmake
# it is that test (ARGS is '|'-separated: add_test would split a ';' list into arguments).

if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  string(REPLACE "|" ";" args "${ARGS}")
  execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(shown "k3host ${args}\n--- exit code: ${code}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(NOT "${code}" STREQUAL "${CODE}")
    message(FATAL_ERROR "expected exit code ${CODE}\n${shown}")
  endif()
  if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
    message(FATAL_ERROR "stderr does not match '${STDERR}'\n${shown}")
  endif()
  if(DEFINED STDOUT AND NOT out MATCHES "${STDOUT}")
    message(FATAL_ERROR "stdout does not match '${STDOUT}'\n${shown}")
  endif()
  if(DEFINED STDERR_NOT AND err MATCHES "${STDERR_NOT}")
    message(FATAL_ERROR "stderr matches '${STDERR_NOT}', which it must not\n${shown}")
  endif()
  if(DEFINED STDOUT_NOT AND out MATCHES "${STDOUT_NOT}")
    message(FATAL_ERROR "stdout matches '${STDOUT_NOT}', which it must not\n${shown}")
  endif()
  return()
endif()

include_guard(GLOBAL)
set(K3_CLI_CHECK_SCRIPT ${CMAKE_CURRENT_LIST_FILE})

function(k3_cli_test name code)
  cmake_parse_arguments(T "" "STDOUT;STDERR;STDOUT_NOT;STDERR_NOT" "ARGS" ${ARGN})
  string(REPLACE ";" "|" joined "${T_ARGS}")
  set(defs -DEXE=$<TARGET_FILE:k3host> "-DARGS=${joined}" -DCODE=${code})
  foreach(check STDOUT STDERR STDOUT_NOT STDERR_NOT)
    if(DEFINED T_${check})
      list(APPEND defs "-D${check}=${T_${check}}")
    endif()
  endforeach()
  add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} ${defs} -P ${K3_CLI_CHECK_SCRIPT}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()
