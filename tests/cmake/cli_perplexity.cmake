# k3host perplexity end to end on make-model's tiny geometry: the result line and JSON, the
# same nll_sum bits at every kernel set, thread count and a streamed budget, and the
# refusals (a folder, a missing file, windows that would leave ids unscored). The values
# themselves are compared with the PyTorch reference by the perplexity-oracle test below
# (tests/support/perplexity_oracle.py).
if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  # Script mode: run each '|'-separated variant of ARGS (variants split at '||') and require
  # the same "nll_sum" text in every JSON result.
  string(REPLACE "||" ";" variants "${VARIANTS}")
  if(NOT DEFINED WINDOW)
    set(WINDOW 24)
  endif()
  if(DEFINED LINES)  # score only the first LINES lines of TEXT
    file(READ ${TEXT} whole)
    string(REGEX MATCHALL "[^\n]*\n" all_lines "${whole}")
    list(SUBLIST all_lines 0 ${LINES} kept)
    list(JOIN kept "" excerpt)
    set(TEXT ${WORK}/excerpt.txt)
    file(WRITE ${TEXT} "${excerpt}")
  endif()
  set(first "")
  foreach(v IN LISTS variants)
    string(REPLACE "|" ";" extra "${v}")
    execute_process(COMMAND ${EXE} perplexity ${TEXT} --json -q --set model.path=${MODEL} --window ${WINDOW} ${extra}
                    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "k3host perplexity ${extra}: exit ${code}\n${out}\n${err}")
    endif()
    if(NOT out MATCHES "\"nll_sum\": ([0-9.e+-]+)")
      message(FATAL_ERROR "no nll_sum in the JSON of ${extra}:\n${out}")
    endif()
    set(sum "${CMAKE_MATCH_1}")
    if(NOT out MATCHES "\"scored\": ([0-9]+)" OR CMAKE_MATCH_1 LESS 100)
      message(FATAL_ERROR "fewer than 100 ids scored with ${extra}:\n${out}")
    endif()
    if(first STREQUAL "")
      set(first "${sum}")
      set(first_args "${extra}")
    elseif(NOT sum STREQUAL first)
      message(FATAL_ERROR "nll_sum ${sum} with '${extra}' differs from ${first} with '${first_args}'")
    endif()
    message(STATUS "${extra}: nll_sum ${sum}")
  endforeach()
  return()
endif()

include(${CMAKE_CURRENT_LIST_DIR}/lib/cli_check.cmake)
set(_k3_ppl_model ${CMAKE_BINARY_DIR}/test-tmp/cli-perplexity/tiny)
add_test(NAME "cli-perplexity: write the tiny model"
         COMMAND $<TARGET_FILE:k3host> make-model -g tiny -o ${_k3_ppl_model} --force -q)
set_tests_properties("cli-perplexity: write the tiny model" PROPERTIES FIXTURES_SETUP k3_cli_ppl_model)

k3_cli_test("cli-perplexity: prints the perplexity, the tokens scored and the windows" 0
  ARGS perplexity docs/model.md --set model.path=${_k3_ppl_model} --window 32
  STDOUT "^perplexity [0-9.]+ over [0-9]+ tokens of docs/model.md \\(mean NLL [0-9.]+ nats, [0-9.]+ bits/token\\)\n[0-9]+ windows of 32 ids, stride 16 \\|")
k3_cli_test("cli-perplexity: --json gives every count and round-trip sums" 0
  ARGS perplexity docs/model.md --set model.path=${_k3_ppl_model} --window 32 --stride 8 --json -q
  STDOUT "\"format\": \"k3host-perplexity-v1\".*\"nll_sum\": [0-9]+\\.[0-9]+.*\"perplexity\": [0-9]+\\.[0-9]+.*\"stride\": 8.*\"window\": 32")
add_test(NAME "cli-perplexity: the same bits at every kernel set, thread count and a streamed budget"
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DMODEL=${_k3_ppl_model} -DTEXT=docs/model.md
                 "-DVARIANTS=--set|kernels.set=scalar|-t|1||--set|kernels.set=auto|-t|2||--set|kernels.set=scalar|-t|2|--set|memory.trunk_gb=0.00002|--set|memory.expert_cache_gb=0.000001||--set|job.prefill_chunk=5"
                 -P ${CMAKE_CURRENT_LIST_FILE}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
# no-sanitizer (this and the fortune matrix below): 3 and 7 minutes under ASan of whole
# forward passes repeated per kernel set, thread count and budget; the same identity runs
# under the sanitizers in the unit test `eval:perplexity bits are the same for every kernel
# set, thread count, chunk and a streamed budget`, and the command itself in the cases above.
set_tests_properties("cli-perplexity: the same bits at every kernel set, thread count and a streamed budget"
                     PROPERTIES LABELS no-sanitizer)
# The trained demo model on held-out text it never saw (data/text/heldout.txt), as
# docs/demo-model.md reports it: the same bits at every kernel set and a streamed budget.
add_test(NAME "cli-perplexity: fortune on held-out text: the same bits at every kernel set and a streamed budget"
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DMODEL=data/models/fortune
                 -DTEXT=data/text/heldout.txt -DLINES=150 -DWINDOW=128 -DWORK=${CMAKE_BINARY_DIR}/test-tmp/cli-perplexity
                 "-DVARIANTS=--set|kernels.set=scalar|-t|1||--set|kernels.set=auto|-t|2||--set|kernels.set=auto|-t|2|--set|memory.trunk_gb=0.001|--set|memory.expert_cache_gb=0.0002"
                 -P ${CMAKE_CURRENT_LIST_FILE}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties("cli-perplexity: fortune on held-out text: the same bits at every kernel set and a streamed budget"
                     PROPERTIES FIXTURES_REQUIRED k3_cli_ppl_model LABELS no-sanitizer)
# Against the float64 PyTorch reference (tools/train/perplexity.py): the same count of scored
# tokens and the perplexity to 7 significant digits (skipped without torch).
add_test(NAME "perplexity-oracle: fortune: k3host perplexity equals the float64 reference's to 7 significant digits"
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/support/perplexity_oracle.py
                 --k3host $<TARGET_FILE:k3host> --model ${PROJECT_SOURCE_DIR}/data/models/fortune
                 --text ${PROJECT_SOURCE_DIR}/data/text/heldout.txt --lines 120 --window 128
                 --work ${CMAKE_BINARY_DIR}/test-tmp/perplexity-oracle)
set_tests_properties("perplexity-oracle: fortune: k3host perplexity equals the float64 reference's to 7 significant digits"
                     PROPERTIES SKIP_RETURN_CODE 77 LABELS oracle)
k3_cli_test("cli-perplexity: a folder is refused before the model loads" 2
  ARGS perplexity docs --set model.path=${CMAKE_BINARY_DIR}/test-tmp/no-such-model
  STDERR "perplexity: docs: a folder, not a text file"
  STDERR_NOT "no-such-model")
k3_cli_test("cli-perplexity: a missing file is refused" 2
  ARGS perplexity ${CMAKE_BINARY_DIR}/test-tmp/no-such-text.txt --set model.path=${_k3_ppl_model}
  STDERR "no-such-text.txt: no such file")
k3_cli_test("cli-perplexity: a stride that leaves ids unscored is refused before the model loads" 2
  ARGS perplexity docs/model.md --window 16 --stride 16 --set model.path=${CMAKE_BINARY_DIR}/test-tmp/no-such-model
  STDERR "the stride must be between 1 and the window minus one \\(15\\)"
  STDERR_NOT "no-such-model")
k3_cli_test("cli-perplexity: --help says what is scored and the exit codes" 0
  ARGS perplexity --help
  STDOUT "FILE.*--window.*--stride.*--json.*Ctrl-C stops after the current chunk")
set_tests_properties("cli-perplexity: prints the perplexity, the tokens scored and the windows"
                     "cli-perplexity: --json gives every count and round-trip sums"
                     "cli-perplexity: the same bits at every kernel set, thread count and a streamed budget"
                     "cli-perplexity: a missing file is refused"
                     PROPERTIES FIXTURES_REQUIRED k3_cli_ppl_model)
