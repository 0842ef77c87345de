# CLI tests of the files a user names (docs/architecture.md, "Files a user names"), on the
# real k3host: an output path that is a FIFO, a symbolic link or a file of the checkpoint in
# use is refused (exit 2, naming the option and the path) and left as it was; an input that
# is a FIFO, a device or over its cap is refused at once, never read without end or waited
# on; a FIFO named like a plugin is never opened; a chat history whose last record lacks only
# its end of line resumes; and the messages of binary input, foreign history ids, the draft
# model and an oversized generated trace name what and where. Devices are used only where a
# k3host without the checks would read them (/dev/null: nothing to read), never as outputs:
# outputs are FIFOs and links, which a k3host without the checks replaces harmlessly.
#
# Included by tests/CMakeLists.txt it registers the tests; run as
#   cmake -DEXE=k3host -DWORK=<scratch dir> -DMODEL=<tiny checkpoint> -DCASE=<case> -P cli_files.cmake
# (in the source folder) it is one of them.
if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")

  # k3_run with a bound: a k3host that waits on a FIFO or reads /dev/zero fails here instead
  # of hanging the suite.
  function(run_bounded)
    cmake_parse_arguments(R "" "INPUT" "ARGS" ${ARGN})
    set(input_args)
    if(DEFINED R_INPUT)
      file(WRITE "${WORK}/stdin.txt" "${R_INPUT}")
      set(input_args INPUT_FILE "${WORK}/stdin.txt")
    endif()
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=K3_LOG_LEVEL --unset=K3_PLUGIN_PATH ${EXE} ${R_ARGS}
                    ${input_args} TIMEOUT 60 RESULT_VARIABLE c OUTPUT_VARIABLE o ERROR_VARIABLE e)
    set(code "${c}" PARENT_SCOPE)
    set(out "${o}" PARENT_SCOPE)
    set(err "${e}" PARENT_SCOPE)
    string(REPLACE ";" " " a "${R_ARGS}")
    set(shown "k3host ${a}\n--- exit code: ${c}\n--- stdout:\n${o}\n--- stderr:\n${e}" PARENT_SCOPE)
  endfunction()

  function(expect_fifo path)
    execute_process(COMMAND test -p "${path}" RESULT_VARIABLE not_fifo)
    if(NOT not_fifo EQUAL 0)
      k3_fail("${path} is no longer a FIFO")
    endif()
  endfunction()

  # A regex matching `text` literally.
  function(literal out text)
    string(REGEX REPLACE "([][+.*?()^$|\\\\])" "\\\\\\1" quoted "${text}")
    set(${out} "${quoted}" PARENT_SCOPE)
  endfunction()

  set(fifo "${WORK}/fifo")
  execute_process(COMMAND mkfifo "${fifo}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mkfifo failed")
  endif()

  if(CASE STREQUAL "outputs")
    # A copy of the tiny checkpoint, so that a k3host writing into it cannot damage the shared one.
    file(COPY "${MODEL}/" DESTINATION "${WORK}/model")
    file(SHA256 "${WORK}/model/config.json" config_before)
    file(WRITE "${WORK}/kept.json" "kept\n")
    file(CREATE_LINK "${WORK}/kept.json" "${WORK}/link" SYMBOLIC)
    # Not -q: the info line "loading …" shows whether the model loaded before the refusal.
    set(job --config presets/laptop.yaml -m "${WORK}/model" -n 1)
    foreach(option --out --save-state --dump-logits trace.out)
      if(option STREQUAL "--out")
        set(key job.report)
      elseif(option STREQUAL "--save-state")
        set(key job.save_state)
      elseif(option STREQUAL "--dump-logits")
        set(key job.dump_logits)
      else()
        set(key trace.out)
      endif()
      foreach(kind fifo link model)
        if(kind STREQUAL "fifo")
          set(path "${fifo}")
          set(says "a FIFO, not a regular file")
        elseif(kind STREQUAL "link")
          set(path "${WORK}/link")
          set(says "a symbolic link, not a regular file: [^\n]*would replace the link itself")
        else()
          set(path "${WORK}/model/config.json")
          literal(dir "${WORK}/model")
          set(says "inside the checkpoint folder ${dir}, which k3host only reads")
        endif()
        if(option STREQUAL "trace.out")
          set(given --set "trace.out=${path}")
          set(origin "--set trace.out=${path}")
        else()
          set(given ${option} "${path}")
          set(origin "${option} ${path}")
        endif()
        run_bounded(ARGS ${job} ${given})
        k3_expect_code(2)
        literal(o "${origin}: ${key}: ${path}: ")
        k3_expect("stderr" err "\\[k3host\\] error: ${o}${says}")
        if(err MATCHES "\\[k3host\\] info: loading")
          k3_fail("refused only after the model loaded")
        endif()
      endforeach()
    endforeach()
    expect_fifo("${fifo}")
    if(NOT IS_SYMLINK "${WORK}/link")
      k3_fail("${WORK}/link is no longer a link")
    endif()
    file(READ "${WORK}/kept.json" kept)
    file(SHA256 "${WORK}/model/config.json" config_after)
    if(NOT kept STREQUAL "kept\n" OR NOT config_before STREQUAL config_after)
      k3_fail("a file that was refused as an output changed")
    endif()
    # Two outputs in one file: the second would replace the first.
    run_bounded(ARGS ${job} --out "${WORK}/same.json" --save-state "${WORK}/same.json")
    k3_expect_code(2)
    k3_expect("stderr" err "job.save_state: [^\n]*same.json: is also job.report \\(from --out [^\n]*same.json\\)")

  elseif(CASE STREQUAL "sim-outputs")
    run_bounded(ARGS sim --generate-trace "${fifo}" --layers 2 --experts 8 --top-k 2 --tokens 4)
    k3_expect_code(2)
    literal(f "${fifo}")
    k3_expect("stderr" err "\\[k3host\\] error: --generate-trace: ${f}: a FIFO, not a regular file")
    expect_fifo("${fifo}")
    run_bounded(ARGS sim --generate-trace "${WORK}/t.trace" --layers 2 --experts 8 --top-k 2 --tokens 4)
    k3_expect_code(0)
    file(WRITE "${WORK}/kept.csv" "kept\n")
    file(CREATE_LINK "${WORK}/kept.csv" "${WORK}/link.csv" SYMBOLIC)
    foreach(option --csv --json --svg)
      run_bounded(ARGS sim "${WORK}/t.trace" --policy lru ${option} "${WORK}/link.csv")
      k3_expect_code(2)
      k3_expect("stderr" err "\\[k3host\\] error: ${option}: [^\n]*link.csv: a symbolic link, not a regular file")
    endforeach()
    file(READ "${WORK}/kept.csv" kept)
    if(NOT IS_SYMLINK "${WORK}/link.csv" OR NOT kept STREQUAL "kept\n")
      k3_fail("the link or its target changed")
    endif()

  elseif(CASE STREQUAL "inputs")
    literal(f "${fifo}")
    # Sparse: 1 byte over the prompt file's cap of 64 MB, costing no disk.
    file(TOUCH "${WORK}/big.txt")
    execute_process(COMMAND truncate -s 64000001 "${WORK}/big.txt" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "truncate failed")
    endif()
    set(job --config presets/laptop.yaml -n 1)  # not -q: "loading …" must not show
    foreach(check
        "--file|${fifo}@--file ${f}: job.prompt_file: ${f}: a FIFO, not a text file"
        "--file|/dev/null@--file /dev/null: job.prompt_file: /dev/null: a character device, not a text file"
        "--file|${WORK}/big.txt@job.prompt_file: [^\n]*big.txt: 64000001 bytes, more than the 64000000 \\(64.0 MB\\) a text file may hold"
        "--set|job.speculative.datastore=${fifo}@job.speculative.datastore: ${f}: a FIFO, not a text file"
        "--set|job.speculative.datastore=/dev/null@job.speculative.datastore: /dev/null: a character device, not a text file"
        "--load-state|${fifo}@--load-state ${f}: job.load_state: ${f}: a FIFO, not a state file"
        "--set|cache.future=${fifo}@--set cache.future=${f}: cache.future: ${f}: a FIFO, not a trace")
      string(REPLACE "@" ";" parts "${check}")
      list(GET parts 0 flag_value)
      list(GET parts 1 says)
      string(REPLACE "|" ";" given "${flag_value}")
      run_bounded(ARGS ${job} ${given})
      k3_expect_code(2)
      k3_expect("stderr" err "\\[k3host\\] error: [^\n]*${says}")
      if(err MATCHES "\\[k3host\\] info: loading")
        k3_fail("refused only after the model loaded")
      endif()
    endforeach()
    run_bounded(ARGS perplexity "${fifo}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: perplexity: ${f}: a FIFO, not a text file")
    run_bounded(ARGS tokenize --file "${fifo}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: tokenize --file: ${f}: a FIFO, not a text file")
    run_bounded(ARGS sim "${fifo}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: ${f}: a FIFO, not a trace")
    run_bounded(ARGS sim --generate-trace "${WORK}/t.trace" --trace-preset "${fifo}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: --trace-preset: ${f}: a FIFO, not a trace preset")
    run_bounded(ARGS chat --config presets/laptop.yaml --resume "${fifo}" INPUT "hi\n")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: chat: --resume: ${f}: a FIFO, not a regular file")
    expect_fifo("${fifo}")

  elseif(CASE STREQUAL "plugins")
    # A FIFO named like a plugin is never opened (dlopen would wait for a writer forever); a
    # file that is no library says what the loader said, nothing glued after it.
    file(MAKE_DIRECTORY "${WORK}/plugins")
    file(CHMOD "${WORK}/plugins" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                             WORLD_READ WORLD_EXECUTE)
    execute_process(COMMAND mkfifo "${WORK}/plugins/k3-cache-x.so")
    file(WRITE "${WORK}/plugins/k3-cache-junk.so" "not a library")
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=K3_LOG_LEVEL "K3_PLUGIN_PATH=${WORK}/plugins" ${EXE} plugins
                    TIMEOUT 60 RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
    set(shown "k3host plugins\n--- exit code: ${code}\n--- stdout:\n${out}\n--- stderr:\n${err}")
    if(NOT code MATCHES "^[0-9]+$")
      k3_fail("k3host plugins did not finish")
    endif()
    k3_expect("stderr" err "refused [^\n]*/k3-cache-x.so: is a FIFO, not a regular file: not a k3host plugin \\(never opened\\)")
    k3_expect("stderr" err "refused [^\n]*/k3-cache-junk.so: cannot be loaded: [^\n]*/k3-cache-junk.so: [a-z][^\n]*\n")
    if(err MATCHES "k3-cache-junk.so: cannot be loaded: [^\n]*\\): ")
      k3_fail("the loader's message has another message glued to it")
    endif()

  elseif(CASE STREQUAL "messages")
    # Binary data (k3host itself) as text: the message names the file and the key.
    literal(exe "${EXE}")
    run_bounded(ARGS --config presets/laptop.yaml -n 1 -q --set "job.speculative.datastore=${EXE}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: --set job.speculative.datastore=${exe}: job.speculative.datastore: ${exe}: the text cannot be tokenised: invalid UTF-8 at byte offset [0-9]+\n")
    run_bounded(ARGS --config presets/laptop.yaml -n 1 -q -f "${EXE}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: --file ${exe}: job.prompt_file: ${exe}: the text cannot be tokenised: invalid UTF-8 at byte offset [0-9]+\n")
    run_bounded(ARGS perplexity "${EXE}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: perplexity: ${exe}: the text cannot be tokenised: invalid UTF-8")
    # A draft model of another vocabulary: its key named once.
    literal(m "${MODEL}")
    run_bounded(ARGS --config presets/laptop.yaml -n 1 -q --set "job.speculative.draft_model=${MODEL}")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: --set job.speculative.draft_model=${m}: job.speculative.draft_model: ${m}: not a draft model for this model: its vocabulary")
    # A generated trace too large to hold: refused up front, from its parameters.
    run_bounded(ARGS sim --generate-trace "${WORK}/big.trace" --layers 1024 --experts 64 --top-k 16 --tokens 262144)
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: trace generator: 1024 layers x top-16 x 262144 forwards = 4294967296 requests, more than the 125000000 a trace may hold")
    run_bounded(ARGS sim --generate-trace "${WORK}/wide.trace" --layers 65536 --experts 512 --top-k 1 --tokens 1)
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: trace generator: 65536 layers x 512 experts = 33554432 experts to rank, more than the 16777216")
    if(EXISTS "${WORK}/big.trace" OR EXISTS "${WORK}/wide.trace")
      k3_fail("a refused trace was written")
    endif()

  elseif(CASE STREQUAL "history")
    # --think: the shipped model answers without it by default; with it the history starts with
    # the internal effort record, one line more to count below.
    set(chat chat --config presets/laptop.yaml --max-tokens 4 --think)
    set(h "${WORK}/h.jsonl")
    run_bounded(ARGS ${chat} --history "${h}" INPUT "Hi there\n")
    k3_expect_code(0)
    # The last record loses only its end of line: it is whole, so it is kept.
    file(READ "${h}" text)
    string(LENGTH "${text}" n)
    math(EXPR n "${n} - 1")
    string(SUBSTRING "${text}" 0 ${n} cut)
    file(WRITE "${h}" "${cut}")
    foreach(messages 2 4)
      run_bounded(ARGS ${chat} --resume "${h}" INPUT "More\n")
      k3_expect_code(0)
      k3_expect("stdout" out "\\[loaded [^\n]*h.jsonl: ${messages} messages")
      if(err MATCHES "incomplete")
        k3_fail("a whole record was taken for a torn one")
      endif()
    endforeach()
    # Every record on its own line, each one JSON.
    file(READ "${h}" text)
    string(REGEX MATCHALL "\n" ends "${text}")
    list(LENGTH ends lines)
    if(NOT lines EQUAL 7)
      k3_fail("expected 7 lines in the history, found ${lines}")
    endif()
    string(REGEX MATCHALL "}\n{" joints "${text}")
    list(LENGTH joints joined)
    if(NOT joined EQUAL 6)
      k3_fail("expected every record on a line of its own")
    endif()

    # An id outside the vocabulary: named at its file:line.
    file(COPY_FILE "${h}" "${WORK}/foreign.jsonl")
    file(APPEND "${WORK}/foreign.jsonl" "{\"role\":\"user\",\"content\":\"x\",\"ids\":[99999]}\n")
    run_bounded(ARGS ${chat} --resume "${WORK}/foreign.jsonl" INPUT "More\n")
    k3_expect_code(2)
    k3_expect("stderr" err "\\[k3host\\] error: [^\n]*foreign.jsonl:8: token id 99999 is outside the model's vocabulary of [0-9]+ ids")

    # A torn last record with the state of another conversation: refused, and the history
    # is not rewritten before it was validated (the torn bytes are still there).
    file(COPY_FILE "${h}" "${WORK}/torn.jsonl")
    file(APPEND "${WORK}/torn.jsonl" "{\"role\":\"us")
    run_bounded(ARGS ${chat} --history "${WORK}/other.jsonl" INPUT "Something else entirely\n")
    k3_expect_code(0)
    file(COPY_FILE "${WORK}/other.jsonl.state" "${WORK}/torn.jsonl.state")
    file(SHA256 "${WORK}/torn.jsonl" before)
    run_bounded(ARGS ${chat} --resume "${WORK}/torn.jsonl" INPUT "More\n")
    k3_expect_code(2)
    k3_expect("stderr" err "torn.jsonl:8: the last record is incomplete")
    k3_expect("stderr" err "\\[k3host\\] error: chat: the model state holds")
    file(SHA256 "${WORK}/torn.jsonl" after)
    if(NOT before STREQUAL after)
      k3_fail("the history was rewritten although its state did not match")
    endif()
    # With its own state it resumes, and the torn bytes go.
    file(COPY_FILE "${h}.state" "${WORK}/torn.jsonl.state")
    run_bounded(ARGS ${chat} --resume "${WORK}/torn.jsonl" INPUT "More\n")
    k3_expect_code(0)
    file(READ "${WORK}/torn.jsonl" text)
    if(text MATCHES "\"us\n|\"us$")
      k3_fail("the torn record is still in the history")
    endif()

  else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
  endif()
  return()
endif()

set(_k3_files_model ${CMAKE_BINARY_DIR}/test-tmp/cli-files/tiny)
add_test(NAME "cli-files: write the tiny model"
         COMMAND $<TARGET_FILE:k3host> make-model -g tiny -o ${_k3_files_model} --force -q)
set_tests_properties("cli-files: write the tiny model" PROPERTIES FIXTURES_SETUP k3_cli_files_model)

foreach(case_title IN ITEMS
    "outputs|--out, --save-state, --dump-logits and trace.out refuse a FIFO, a link and a file of the checkpoint, before the model loads, leaving them as they were"
    "sim-outputs|sim refuses a FIFO or a link as --generate-trace, --csv, --json or --svg"
    "inputs|a FIFO, a device or a file over its cap is refused at once as a prompt file, datastore, state, trace, preset, text or history"
    "plugins|a FIFO named like a plugin is never opened, and a load error is the loader's message alone"
    "messages|binary text names file and key, the draft model names its key once, an oversized generated trace is refused from its parameters"
    "history|a history whose last record lacks only its end of line resumes; ids outside the vocabulary name file:line, nothing is rewritten before it is validated")
  string(REPLACE "|" ";" parts "${case_title}")
  list(GET parts 0 case)
  list(GET parts 1 title)
  add_test(NAME "cli-files: ${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DWORK=${CMAKE_BINARY_DIR}/test-tmp/cli-files/${case}
                   -DMODEL=${_k3_files_model} -DCASE=${case} -P ${CMAKE_CURRENT_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties("cli-files: ${title}" PROPERTIES FIXTURES_REQUIRED k3_cli_files_model)
endforeach()
