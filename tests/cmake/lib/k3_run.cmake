# Helpers for the CLI test scripts that run k3host several times in one case (cmake -P):
#   k3_run(ENV <NAME=VALUE...> ARGS <args...>)  runs EXE with K3_LOG_LEVEL and every variable
#       listed in K3_RUN_UNSET removed from the environment, then ENV added; leaves code, out,
#       err and `shown` (everything, for a failure message) in the caller's scope.
#   k3_fail(WHAT)                 stops the test with WHAT and the last run
#   k3_expect_code(WANT)          the last run's exit code
#   k3_expect(WHAT VAR REGEX)     VAR (out, err, ...) matches REGEX
function(k3_run)
  cmake_parse_arguments(R "" "" "ENV;ARGS" ${ARGN})
  set(unset --unset=K3_LOG_LEVEL)
  foreach(name IN LISTS K3_RUN_UNSET)
    list(APPEND unset --unset=${name})
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${unset} ${R_ENV} ${EXE} ${R_ARGS}
                  RESULT_VARIABLE c OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(code "${c}" PARENT_SCOPE)
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
  string(REPLACE ";" " " a "${R_ARGS}")
  set(shown "${R_ENV} k3host ${a}\n--- exit code: ${c}\n--- stdout:\n${o}\n--- stderr:\n${e}" PARENT_SCOPE)
endfunction()

function(k3_fail what)
  message(FATAL_ERROR "${what}\n${shown}")
endfunction()

function(k3_expect_code want)
  if(NOT code EQUAL ${want})
    k3_fail("expected exit code ${want}")
  endif()
endfunction()

function(k3_expect what var regex)
  if(NOT ${var} MATCHES "${regex}")
    k3_fail("${what} does not match '${regex}'")
  endif()
endfunction()
