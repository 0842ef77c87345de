# CLI tests of what the main job prints, on the model the repository ships (greedy, so the
# text is the same on every machine): stdout carries the text and a short summary (one line
# per token only with -v); a run that fills the context stops there like at -n, says so and
# exits 0, while a prompt the context cannot hold is exit 2 before anything is generated;
# every log line has the one form "[WHO] LEVEL: ..." on stderr, on a line of its own even
# when stdout's text is mid-line on the same terminal (run under script(1), a pseudo-terminal
# both streams share).
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it runs one case:
#   cmake -DEXE=k3host -DSRC=<source dir> -DWORK=<scratch dir> -DCASE=<case> -P cli_output.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_policy(VERSION 3.20)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)  # k3_run, k3_expect_code, k3_expect
  function(k3_expect_not what var regex)
    if(${var} MATCHES "${regex}")
      k3_fail("${what} matches '${regex}' but must not")
    endif()
  endfunction()
  # Every line of stderr is a log line "[WHO] LEVEL: ..." or a line of the memory plan table.
  function(k3_expect_log_lines what)
    string(REPLACE "\r" "" text "${err}")
    string(REPLACE ";" "," text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    foreach(line IN LISTS lines)
      if(line STREQUAL "" OR line MATCHES "^\\[[a-z0-9/_-]+\\] (trace|debug|info|warning|error): "
         OR line MATCHES "^memory plan$" OR line MATCHES "^  [A-Za-z]")
        continue()
      endif()
      k3_fail("${what}: a stderr line that is not a log line: '${line}'")
    endforeach()
  endfunction()
  file(MAKE_DIRECTORY "${WORK}")
  set(job --config laptop --set threads=1)

  if(CASE STREQUAL "context")
    # 16 positions, 2 of them the prompt: 14 generated tokens are fed, the 15th is the last.
    k3_run(ARGS ${job} -c 16 -n 32 --out "${WORK}/context.json")
    k3_expect_code(0)
    k3_expect("stdout" out "\ngenerated 15 tokens \\(stopped: context full, 16 tokens\\) \\| ")
    k3_expect_not("stderr" err "error|context full")
    file(READ "${WORK}/context.json" report)
    string(JSON reason GET "${report}" stop_reason)
    string(JSON n LENGTH "${report}" generated_ids)
    if(NOT reason STREQUAL "context_full" OR NOT n EQUAL 15)
      k3_fail("the report says stop_reason '${reason}' with ${n} ids, expected context_full with 15")
    endif()
    # The token limit: the report says so too.
    k3_run(ARGS ${job} -n 3 --out "${WORK}/length.json")
    k3_expect_code(0)
    file(READ "${WORK}/length.json" report)
    string(JSON reason GET "${report}" stop_reason)
    if(NOT reason STREQUAL "length")
      k3_fail("the report says stop_reason '${reason}', expected length")
    endif()
    # A prompt longer than the context cannot even be fed: a usage error before any output.
    k3_run(ARGS ${job} -c 1 -n 32)
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: the prompt does not fit the context: 2 tokens exceed memory.context 1 \\(raise it: -c/--context N\\)\n$")
    k3_expect_not("stdout" out "output:")
  elseif(CASE STREQUAL "steps")
    k3_run(ARGS ${job} -n 32)
    k3_expect_code(0)
    k3_expect_not("stdout" out "(^|\n)step ")
    string(REGEX MATCHALL "\n" newlines "${out}")
    list(LENGTH newlines n)
    if(n GREATER 10)
      k3_fail("stdout has ${n} lines for 32 tokens")
    endif()
    k3_expect("stdout" out "^prompt \\(2 tokens\\): Life is\noutput: [^\n]")
    k3_expect("stdout" out "\ngenerated 32 tokens \\| prefill [^\n]*\nresident: [^\n]*\n")
    k3_expect_log_lines("a default run")
    k3_run(ARGS ${job} -n 32 -v)
    k3_expect_code(0)
    k3_expect("-v stdout" out "\nstep +0 +[0-9.]+ s\n(.*\n)?step +31 +[0-9.]+ s  last token: ")
    k3_expect_log_lines("a -v run")
    # Errors have the same form, the command line's own too.
    k3_run(ARGS --config no-such-preset)
    k3_expect_code(2)
    k3_expect_log_lines("a missing preset")
    k3_run(ARGS --config laptop --no-such-flag)
    k3_expect_code(2)
    k3_expect("an unknown flag" err "^\\[k3host\\] error: [^\n]*--no-such-flag")
    k3_expect_log_lines("an unknown flag")
  elseif(CASE STREQUAL "fresh-line")
    find_program(SCRIPT script)
    if(NOT SCRIPT)
      message("script(1) not found: skipped")
      cmake_language(EXIT 77)
    endif()
    # The tiered storage logs its totals when the model closes, just after the last token,
    # while the text "...According to the" is still mid-line.
    file(REMOVE_RECURSE "${WORK}/tier")
    set(tiered ${job} --set storage.plugin=tiered --set "storage.params.dir=${WORK}/tier" --set storage.params.inner=posix)
    # Two pipes: stdout is exactly the text, its line ended once, and the summary.
    k3_run(ARGS ${tiered})
    k3_expect_code(0)
    k3_expect("stdout" out "According to the\ngenerated 32 tokens")
    k3_expect("stderr" err "\n\\[storage/tiered\\] info: [0-9]+ bytes from the tier")
    # One terminal for both: the log line starts a line of its own, and no empty line follows it.
    string(REPLACE ";" " " command "${EXE};${tiered}")
    execute_process(COMMAND ${SCRIPT} -qec "${command}" /dev/null RESULT_VARIABLE code OUTPUT_VARIABLE screen
                    ERROR_VARIABLE screen_err)
    set(shown "script -qec '${command}' /dev/null\n--- exit code: ${code}\n--- screen:\n${screen}${screen_err}")
    string(REPLACE "\r" "" screen "${screen}")
    k3_expect_code(0)
    k3_expect("the terminal" screen "\nAccording to the\n\\[storage/tiered\\] info: [^\n]*\ngenerated 32 tokens")
  else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
  endif()
  return()
endif()

set(_k3_output_work ${PROJECT_BINARY_DIR}/test-tmp/cli-output)
function(k3_cli_output_test case title)
  add_test(NAME "cli-output: ${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${_k3_output_work}/${case}
                   -DCASE=${case} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties("cli-output: ${title}" PROPERTIES SKIP_RETURN_CODE 77)
endfunction()
k3_cli_output_test(context "a full context stops generation like -n, exit 0, the report says why; a prompt too long is exit 2")
k3_cli_output_test(steps "stdout is the text and a short summary, one line per token only with -v; every log line one form")
k3_cli_output_test(fresh-line "a log line after mid-line text starts its own line where stdout and stderr share a terminal")
