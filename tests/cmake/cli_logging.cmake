# CLI tests of logging: -q hides the info lines (and stdout keeps only the generated text),
# -v shows debug lines (the storage plugin's "opened ..."), K3_LOG_LEVEL sets the level when
# no flag does and a flag beats it, a bad level is exit 2 naming where it came from, and
# --log-file writes the same lines with a timestamp each while the terminal stays plain.
# The job runs on the tiny model, generated once into the scratch folder.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it runs one case:
#   cmake -DEXE=k3host -DSRC=<source dir> -DWORK=<scratch dir> -DCASE=<case> -P cli_logging.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_policy(VERSION 3.20)  # quoted strings are never variable names (CMP0054)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)  # k3_run, k3_expect_code, k3_expect
  function(k3_expect_not what var regex)
    if(${var} MATCHES "${regex}")
      message(FATAL_ERROR "${what} matches '${regex}' but must not\n${shown}")
    endif()
  endfunction()

  set(model "${WORK}/model")
  set(job --config "${SRC}/configs/default.yaml" --set "model.path=${model}" --set model.generate_if_missing=false
      --set job.max_new_tokens=2 --set threads=1 --ids 5,17,99)
  set(info_line "\\[k3host\\] info: loading ")                # an info status line of the job
  set(debug_line "\\[storage/posix\\] debug: opened ")  # a plugin's debug line
  set(stamp "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\\.[0-9][0-9][0-9] ")

  if(CASE STREQUAL "model")
    file(REMOVE_RECURSE "${WORK}")
    file(MAKE_DIRECTORY "${WORK}")
    k3_run(ARGS make-model -g tiny -o "${model}")
    k3_expect_code(0)
  elseif(CASE STREQUAL "levels")
    k3_run(ARGS ${job})
    k3_expect_code(0)
    k3_expect("default stderr" err "${info_line}")
    k3_expect_not("default stderr" err "debug: ")
    k3_expect_not("default stderr" err "${stamp}")  # the terminal stays clean
    k3_expect("default stdout" out "prompt \\(3 tokens\\)")

    k3_run(ARGS ${job} -q)
    k3_expect_code(0)
    k3_expect_not("-q stderr" err "\\[k3host\\] ")
    k3_expect_not("-q stdout" out "prompt|generated [0-9]+ tokens")

    k3_run(ARGS ${job} -v)
    k3_expect_code(0)
    k3_expect("-v stderr" err "${debug_line}")
    k3_expect("-v stderr" err "\\[k3host\\] debug: log level debug \\(from -v\\)")
    k3_expect("-v stderr" err "${info_line}")

    k3_run(ARGS ${job} --log-level error)
    k3_expect_code(0)
    k3_expect_not("--log-level error stderr" err "\\[k3host\\] ")
    k3_expect("--log-level error stdout" out "prompt \\(3 tokens\\)")  # the job's output is not the log
  elseif(CASE STREQUAL "env")
    k3_run(ENV K3_LOG_LEVEL=debug ARGS ${job})
    k3_expect_code(0)
    k3_expect("K3_LOG_LEVEL=debug stderr" err "${debug_line}")
    k3_expect("K3_LOG_LEVEL=debug stderr" err "log level debug \\(from K3_LOG_LEVEL\\)")

    k3_run(ENV K3_LOG_LEVEL=WARN ARGS ${job})
    k3_expect_code(0)
    k3_expect_not("K3_LOG_LEVEL=WARN stderr" err "\\[k3host\\] ")

    # A flag beats the environment, both ways.
    k3_run(ENV K3_LOG_LEVEL=warn ARGS ${job} -v)
    k3_expect_code(0)
    k3_expect("K3_LOG_LEVEL=warn -v stderr" err "${debug_line}")
    k3_run(ENV K3_LOG_LEVEL=debug ARGS ${job} --log-level info)
    k3_expect_code(0)
    k3_expect("K3_LOG_LEVEL=debug --log-level info stderr" err "${info_line}")
    k3_expect_not("K3_LOG_LEVEL=debug --log-level info stderr" err "debug: ")

    k3_run(ENV K3_LOG_LEVEL=loud ARGS ${job})
    k3_expect_code(2)
    k3_expect("K3_LOG_LEVEL=loud stderr" err
              "^\\[k3host\\] error: K3_LOG_LEVEL: 'loud' is not a log level \\(trace, debug, info, warn, error or off\\)\n$")
  elseif(CASE STREQUAL "file")
    set(log "${WORK}/logs/run.log")
    file(REMOVE_RECURSE "${WORK}/logs")
    k3_run(ARGS ${job} -v --log-file "${log}")
    k3_expect_code(0)
    if(NOT EXISTS "${log}")
      message(FATAL_ERROR "no log file ${log}\n${shown}")
    endif()
    file(READ "${log}" logged)
    k3_expect("the log file" logged "^${stamp}\\[k3host\\] debug: log level debug \\(from -v\\), also written to ")
    k3_expect("the log file" logged "\n${stamp}\\[k3host\\] info: loading ")
    k3_expect("the log file" logged "\n${stamp}${debug_line}")
    # Every line of the file starts with its timestamp; the terminal has the same lines without.
    string(REGEX MATCHALL "\n" newlines "\n${logged}")
    string(REGEX MATCHALL "\n${stamp}" stamped "\n${logged}")
    list(LENGTH newlines n_lines)
    list(LENGTH stamped n_stamped)
    math(EXPR n_lines "${n_lines} - 1")  # the file ends with a newline
    if(NOT n_stamped EQUAL n_lines OR n_lines LESS 5)
      message(FATAL_ERROR "${n_stamped} of the log file's ${n_lines} lines start with a timestamp\n${logged}")
    endif()
    k3_expect_not("stderr with --log-file" err "${stamp}")
    k3_expect("stderr with --log-file" err "${info_line}")

    # An error reaches the file too; --log-timestamps puts the time on the terminal as well.
    k3_run(ARGS --config "${SRC}/configs/test/no-such-file.yaml" --log-file "${log}" --log-timestamps)
    k3_expect_code(2)
    k3_expect("stderr with --log-timestamps" err "^${stamp}\\[k3host\\] error: pipeline file ")
    file(READ "${log}" logged)
    k3_expect("the log file after an error" logged "\n${stamp}\\[k3host\\] error: pipeline file [^\n]*does not exist\n$")

    k3_run(ARGS ${job} --log-file "${WORK}")  # a folder
    k3_expect_code(2)
    k3_expect("stderr for a log file that is a folder" err "\\[k3host\\] error: --log-file: [^\n]*: a folder, not a regular file")
  elseif(CASE STREQUAL "usage")
    k3_run(ARGS --log-level chatty --print-schema)
    k3_expect_code(2)
    k3_expect("stderr" err "--log-level: 'chatty' is not a log level \\(trace, debug, info, warn, error or off\\)")
    k3_run(ARGS -q -v --print-schema)
    k3_expect_code(2)
    k3_expect("stderr" err "excludes")
    k3_run(ARGS --help)
    k3_expect_code(0)
    k3_expect("--help" out "--log-level LEVEL[^\n]*\n?[^\n]*trace, debug, info \\(default\\), warn, error or off")
    k3_expect("--help" out "K3_LOG_LEVEL")
    k3_expect("--help" out "-v,--verbose[^\n]*\n?[^\n]*debug, twice \\(-vv\\) trace")
    k3_expect("--help" out "-q,--quiet[^\n]*\n?[^\n]*Warnings and errors only")
    k3_expect("--help" out "--log-file PATH[^\n]*\n?[^\n]*date and time")
    # The flags work after a subcommand too.
    k3_run(ARGS make-model -g tiny -o "${WORK}/model-again" -v)
    k3_expect_code(0)
    k3_expect("make-model -v stderr" err "\\[k3host\\] debug: log level debug \\(from -v\\)")
  else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
  endif()
  return()
endif()

set(_k3_log_work ${PROJECT_BINARY_DIR}/test-tmp/cli-logging)
set(_k3_log_script ${CMAKE_CURRENT_LIST_FILE})
function(k3_cli_logging_test case title)
  add_test(NAME "cli-logging: ${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${_k3_log_work}
                   -DCASE=${case} -P ${_k3_log_script}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  if(case STREQUAL "model")
    set_tests_properties("cli-logging: ${title}" PROPERTIES FIXTURES_SETUP k3_cli_logging_model)
  else()
    set_tests_properties("cli-logging: ${title}" PROPERTIES FIXTURES_REQUIRED k3_cli_logging_model)
  endif()
endfunction()
k3_cli_logging_test(model "make the tiny model")
k3_cli_logging_test(levels "-q hides info lines, -v shows debug lines, --log-level sets the level")
k3_cli_logging_test(env "K3_LOG_LEVEL sets the level, a flag beats it, a bad value is exit 2")
k3_cli_logging_test(file "--log-file has every line with a timestamp, the terminal none")
k3_cli_logging_test(usage "a bad --log-level, -q with -v, --help, flags after a subcommand")
