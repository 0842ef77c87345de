# The fuzzing tools' own refusals (tests/fuzz, tools/fuzz.sh; docs/testing.md "Fuzzing"):
# fuzz.sh runs only on a K3_FUZZ build and takes whole seconds, the replay main refuses an
# input that is not there rather than replaying nothing. The harnesses' corpora themselves
# replay as `fuzz-replay: <harness>` (tests/fuzz/CMakeLists.txt).
include(${CMAKE_CURRENT_LIST_DIR}/lib/cli_check.cmake)

function(k3_fuzz_tool_test name code exe)
  cmake_parse_arguments(T "" "STDERR;STDOUT" "ARGS" ${ARGN})
  string(REPLACE ";" "|" joined "${T_ARGS}")
  set(defs -DEXE=${exe} "-DARGS=${joined}" -DCODE=${code})
  foreach(check STDOUT STDERR)
    if(DEFINED T_${check})
      list(APPEND defs "-D${check}=${T_${check}}")
    endif()
  endforeach()
  add_test(NAME "fuzz-tools: ${name}" COMMAND ${CMAKE_COMMAND} ${defs} -P ${K3_CLI_CHECK_SCRIPT}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()

set(k3_fuzz_sh ${PROJECT_SOURCE_DIR}/tools/fuzz.sh)
k3_fuzz_tool_test("fuzz.sh takes whole seconds only" 2 ${k3_fuzz_sh}
  ARGS --build-dir ${PROJECT_BINARY_DIR} --seconds 0
  STDERR "--seconds must be a whole number of seconds >= 1, got '0'")
k3_fuzz_tool_test("fuzz.sh refuses an unknown option" 2 ${k3_fuzz_sh}
  ARGS --minutes 3
  STDERR "fuzz.sh: unknown option --minutes")
if(NOT K3_FUZZ)
  k3_fuzz_tool_test("fuzz.sh refuses a build that is not a K3_FUZZ build" 2 ${k3_fuzz_sh}
    ARGS --build-dir ${PROJECT_BINARY_DIR} --seconds 1
    STDERR "is not a K3_FUZZ build")
  k3_fuzz_tool_test("the replay main refuses an input that is not there" 2 $<TARGET_FILE:k3fuzz-trace>
    ARGS ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/no-such-harness
    STDERR "replay: .*no-such-harness: no such file or folder")
else()
  k3_fuzz_tool_test("fuzz.sh refuses a harness that is not built" 2 ${k3_fuzz_sh}
    ARGS --build-dir ${PROJECT_BINARY_DIR} --seconds 1 no_such_parser
    STDERR "no harness 'no_such_parser'")
endif()
