# CLI tests of `k3host bench` on the tiny model: JSON, CSV and table output, A/B ratios,
# interleaving, exact ids across repetitions and pipelines, progress on stderr, --reload,
# Ctrl-C, bad input. The driver is tests/support/bench_cli_test.py (its header says what each
# case checks); the first case writes the model and the two pipelines the others use.
find_program(K3_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT K3_PYTHON3)
  find_program(K3_PYTHON3 python3)
endif()
if(NOT K3_PYTHON3)
  message(STATUS "cli-bench tests: no python3")
  return()
endif()
set(k3_bench_cases
  "model|make the tiny model and two pipelines (resident A, streaming B)"
  "json|A/B as JSON: interleaved runs, metrics from the raw counts, B/A = mean ratio, identical ids, progress on stderr"
  "csv|CSV rows per run, mean, sd and B/A, and one pipeline through the global --config"
  "table|the table's B/A matches its printed means, -q hides the progress"
  "reload|--reload loads every repetition afresh and gives the same ids"
  "interrupt|SIGINT stops the bench and prints the repetitions done (exit 5), a killed worker is exit 1"
  "parallel|--parallel 1,3: streams decoded together, stream 0 as alone, figures for all streams"
  "usage|bad input is exit 2 with a clear message, --help says what is reset and kept")
foreach(entry IN LISTS k3_bench_cases)
  string(FIND "${entry}" "|" bar)
  string(SUBSTRING "${entry}" 0 ${bar} case)
  math(EXPR from "${bar} + 1")
  string(SUBSTRING "${entry}" ${from} -1 title)
  add_test(NAME "cli-bench: ${title}"
           COMMAND ${K3_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/support/bench_cli_test.py --exe $<TARGET_FILE:k3host>
                   --src ${PROJECT_SOURCE_DIR} --work ${PROJECT_BINARY_DIR}/test-tmp/cli-bench --case ${case})
  set_tests_properties("cli-bench: ${title}" PROPERTIES TIMEOUT 300)
  if(case STREQUAL "model")
    set_tests_properties("cli-bench: ${title}" PROPERTIES FIXTURES_SETUP k3_cli_bench_model)
  else()
    set_tests_properties("cli-bench: ${title}" PROPERTIES FIXTURES_REQUIRED k3_cli_bench_model)
  endif()
endforeach()
