# CLI tests of `k3host --prompts FILE` (docs/pipelines.md, "Many prompts") on the shipped
# fortune model: the results of prompts decoded together (other prompts beside them, drafts
# on, streamed budgets, a small prefill budget, another thread count) are those of the
# prompts run one at a time and of a prompt run alone, byte for byte, a plain file of one prompt
# a line too, with the report's batch and latency figures; the plan's choice of slots and the
# exit 3 when too many do not fit (plan, --prompts and serve); and a bad prompts file or key is
# refused naming the file, the line and what is wrong.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it is one:
#   cmake -DEXE=k3host -DWORK=<scratch dir> -DCASE=identity|plan|errors -P cli_prompts.cmake   (in the source dir)
if(CMAKE_SCRIPT_MODE_FILE)
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")
  function(run code)
    execute_process(COMMAND ${EXE} --config presets/laptop.yaml ${ARGN} RESULT_VARIABLE got OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
    if(NOT got EQUAL code)
      message(FATAL_ERROR "k3host ${ARGN}: exit ${got}, expected ${code}\n${out}\n${err}")
    endif()
    set(out "${out}" PARENT_SCOPE)
    set(err "${err}" PARENT_SCOPE)
  endfunction()
  if(CASE STREQUAL "identity")
    file(WRITE "${WORK}/prompts.jsonl"
         "{\"prompt\": \"Life is\", \"max_tokens\": 10}\n"
         "{\"prompt\": \"Love is\", \"max_tokens\": 6, \"temperature\": 0.9, \"seed\": 4}\n"
         "\n"
         "{\"ids\": [3072, 258, 641, 575], \"max_tokens\": 12, \"top_k\": 40, \"temperature\": 0.7, \"seed\": 9}\n"
         "{\"prompt\": \"The best thing about a boolean is\", \"max_tokens\": 8, \"repeat_penalty\": 1.2}\n"
         "{\"prompt\": \"Q: What is\", \"max_tokens\": 3}\n")
    set(p --prompts "${WORK}/prompts.jsonl")
    # One at a time without drafts: the reference.
    run(0 ${p} --parallel 1 --draft-max 0 --results "${WORK}/one.jsonl")
    # Three at a time with drafts, the report written too.
    run(0 ${p} --parallel 3 --results "${WORK}/three.jsonl" --out "${WORK}/report.json")
    # Streamed, prompts prefilled two tokens per step beside the decoding ones.
    run(0 ${p} --parallel 4 --set serve.prefill_budget=2 --set memory.trunk_gb=0.0001
          --set memory.expert_cache_gb=0.0001 --results "${WORK}/streamed.jsonl")
    # To stdout, two threads.
    run(0 ${p} --parallel 2 -t 2)
    file(WRITE "${WORK}/stdout.jsonl" "${out}")
    file(READ "${WORK}/one.jsonl" one)
    string(REGEX MATCHALL "\n" lines "${one}")
    list(LENGTH lines n)
    if(NOT n EQUAL 5)
      message(FATAL_ERROR "${n} result lines for 5 prompts:\n${one}")
    endif()
    foreach(other three streamed stdout)
      file(READ "${WORK}/${other}.jsonl" text)
      if(NOT text STREQUAL one)
        message(FATAL_ERROR "the ${other} results differ from one prompt at a time:\n${text}\nvs\n${one}")
      endif()
    endforeach()
    # The third prompt alone, as the main job runs it.
    run(0 -q --ids 3072,258,641,575 -n 12 --top-k 40 --temp 0.7 --seed 9 --out "${WORK}/alone.json")
    file(READ "${WORK}/alone.json" alone)
    string(JSON alone_ids GET "${alone}" generated_ids)
    string(REGEX MATCHALL "[^\n]+" rows "${one}")
    list(GET rows 2 third)
    string(JSON third_ids GET "${third}" ids)
    string(JSON third_line GET "${third}" line)
    string(REGEX REPLACE "[ \n]" "" alone_ids "${alone_ids}")
    string(REGEX REPLACE "[ \n]" "" third_ids "${third_ids}")
    if(NOT alone_ids STREQUAL third_ids OR NOT third_line EQUAL 4)
      message(FATAL_ERROR "the third prompt (line ${third_line}) gave ${third_ids}, alone ${alone_ids}")
    endif()
    # The report: the prompts were decoded together.
    file(READ "${WORK}/report.json" report)
    string(JSON parallel GET "${report}" parallel)
    string(JSON mean GET "${report}" steps mean_sequences)
    string(JSON generated GET "${report}" generated_tokens)
    if(NOT parallel EQUAL 3 OR mean LESS_EQUAL 1.5 OR NOT generated EQUAL 39)
      message(FATAL_ERROR "report: parallel ${parallel}, ${mean} sequences per step, ${generated} tokens")
    endif()
    # ... and the batch size of every step, queue waits, first tokens and token gaps.
    string(JSON by_size GET "${report}" steps by_sequences)
    string(JSON steps GET "${report}" steps count)
    string(JSON waits GET "${report}" queue_wait_seconds count)
    string(JSON firsts GET "${report}" first_token_seconds count)
    string(JSON gaps GET "${report}" inter_token_seconds count)
    string(JSON gap_p99 GET "${report}" inter_token_seconds p99)
    string(JSON three GET "${report}" steps by_sequences 3)
    if(NOT waits EQUAL 5 OR NOT firsts EQUAL 5 OR gaps LESS 20 OR gap_p99 LESS 0 OR three LESS 1 OR steps LESS 10)
      message(FATAL_ERROR "report: ${steps} steps by size ${by_size}, ${waits} queue waits, ${firsts} first tokens, "
                          "${gaps} token gaps (p99 ${gap_p99})")
    endif()
    # One prompt a line, plain text: each line's result is that prompt run alone.
    file(WRITE "${WORK}/plain.txt" "Life is\nThe best thing about a boolean is\nQ: What is\n")
    run(0 --prompts "${WORK}/plain.txt" --parallel 3 -n 7 --temp 0.8 --seed 3)
    string(REGEX MATCHALL "[^\n]+" rows "${out}")
    list(LENGTH rows n)
    if(NOT n EQUAL 3)
      message(FATAL_ERROR "${n} result lines for 3 plain prompts:\n${out}")
    endif()
    list(GET rows 1 second)
    string(JSON second_ids GET "${second}" ids)
    run(0 -q -p "The best thing about a boolean is" -n 7 --temp 0.8 --seed 3 --out "${WORK}/alone-plain.json")
    file(READ "${WORK}/alone-plain.json" alone)
    string(JSON alone_ids GET "${alone}" generated_ids)
    string(REGEX REPLACE "[ \n]" "" alone_ids "${alone_ids}")
    string(REGEX REPLACE "[ \n]" "" second_ids "${second_ids}")
    if(NOT alone_ids STREQUAL second_ids)
      message(FATAL_ERROR "the second plain line gave ${second_ids}, alone ${alone_ids}")
    endif()
    return()
  endif()
  if(CASE STREQUAL "plan")
    # The default: the plan chooses the slots (the most, up to 8, within a quarter of the
    # memory: all 8 for this small model).
    run(0 plan --from-checkpoint --batched)
    if(NOT out MATCHES "8 sequences decoded together \\(serve.parallel auto")
      message(FATAL_ERROR "plan --batched does not show the plan's 8 slots:\n${out}")
    endif()
    run(0 plan --from-checkpoint --parallel 3)
    if(NOT out MATCHES "3 sequences decoded together \\(serve.parallel\\)" OR NOT out MATCHES "MLA latent KV[^\n]*3 sequences")
      message(FATAL_ERROR "plan --parallel 3 does not count 3 slots:\n${out}")
    endif()
    # 64 slots of a million positions: tens of GB of KV. Where the machine has that much
    # memory, nothing is refused and the server would start: only the plan is checked.
    set(huge --parallel 64 -c 1048576)
    execute_process(COMMAND ${EXE} --config presets/laptop.yaml plan --from-checkpoint ${huge} RESULT_VARIABLE got
                    OUTPUT_QUIET ERROR_VARIABLE err)
    if(got EQUAL 0)
      message(STATUS "this machine holds 64 sequences of 1048576 positions: the refusal is not checked")
      return()
    endif()
    set(advice "lower serve.parallel \\(64 sequences of [0-9.]+ [MG]B each\\)")
    if(NOT got EQUAL 3 OR NOT err MATCHES "${advice}")
      message(FATAL_ERROR "plan ${huge}: exit ${got}, expected 3 naming serve.parallel:\n${err}")
    endif()
    file(WRITE "${WORK}/p.txt" "Life is\n")
    foreach(cmd "--prompts;${WORK}/p.txt" "serve;--port;0")
      execute_process(COMMAND ${EXE} --config presets/laptop.yaml ${cmd} ${huge} RESULT_VARIABLE got OUTPUT_QUIET
                      ERROR_VARIABLE err TIMEOUT 60)
      if(NOT got EQUAL 3 OR NOT err MATCHES "${advice}")
        message(FATAL_ERROR "${cmd} ${huge}: exit ${got}, expected 3 naming serve.parallel:\n${err}")
      endif()
    endforeach()
    return()
  endif()
  # CASE errors: each refused before the model loads, naming the file, the line and the item.
  function(refused text expect)
    file(WRITE "${WORK}/bad.jsonl" "${text}")
    run(2 --prompts "${WORK}/bad.jsonl" ${ARGN})
    if(NOT err MATCHES "${expect}")
      message(FATAL_ERROR "for ${text}: stderr does not match '${expect}':\n${err}")
    endif()
  endfunction()
  refused("{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"temprature\": 1}\n" "bad.jsonl:2: unknown key \"temprature\"")
  refused("{\"prompt\": \"a\", \"top_p\": 0}\n" "bad.jsonl:1: \"top_p\" must be a number above 0 to 1, got 0")
  refused("{\"prompt\": \"a\", \"max_tokens\": -3}\n" "bad.jsonl:1: \"max_tokens\" must be an integer from 0 to 1048576")
  refused("{\"prompt\": \"a\"}\n[1, 2]\n" "bad.jsonl:2: not a JSON object")
  refused("{\"prompt\": \"a\", \"ids\": [1]}\n" "bad.jsonl:1: both \"prompt\" and \"ids\"")
  refused("{\"ids\": [3072, 999999]}\n" "bad.jsonl:1: token id 999999 is outside the vocabulary")
  refused("\n  \n" "bad.jsonl: no prompt in the file")
  refused("Life is\n" "job.save_state[^\n]*is for a run of one prompt" --save-state "${WORK}/s.state")
  refused("Life is\n" "job.results[^\n]*a folder" --results "${WORK}")
  return()
endif()

foreach(c identity plan errors)
  if(c STREQUAL "identity")
    set(title "cli-prompts: prompts decoded together give the results of each alone (drafts, streamed, threads, prefill budget)")
  elseif(c STREQUAL "plan")
    set(title "cli-prompts: the plan chooses the slots, counts them, and too many is exit 3 naming serve.parallel (plan, --prompts, serve)")
  else()
    set(title "cli-prompts: a bad prompts file or a key of a one-prompt run is refused naming the file, line and item")
  endif()
  add_test(NAME "${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cli-prompts-${c}
                   -DCASE=${c} -P ${CMAKE_CURRENT_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()
