# CLI tests of a failing routed-expert read: `k3host` on the tiny model,
# streaming its experts through the `faulty` storage decorator (over `posix`).
#   - unrecoverable: one expert's bytes always fail (`fail_offsets`); the run finishes (the
#     report holds every generated token), stderr names that layer and expert, exit code 4;
#   - recoverable: every request fails once (`eio_rate=1` or `short_read_rate=1` with
#     `transient=true`, i.e. one failure, fewer than the 3 read attempts); exit 0 and the
#     generated text, ids and the prompt's logits are identical to a clean `posix` run.
#   - the state an unrecoverable run saves is marked unsound: resuming it is exit 2 naming
#     the failed expert unless job.accept_unsound_state, and it stays unsound when saved
#     again; the clean run's state resumes.
# The budgets are a few kB so the trunk ring, the expert cache and the embedding rows really
# stream. tiny is written in ONE shard (shard_size 64MiB): faulty's offsets apply to every
# file it opens, so with one file the poisoned offset is covered by that expert alone.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it runs one case:
#   cmake -DEXE=k3host -DSRC=<source dir> -DWORK=<scratch dir> -DCASE=unrecoverable|recoverable -P cli_exit4.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  # The routed expert to poison: tiny layer 2 (a MoE layer), expert 5. The prompt is 32
  # tokens in one prefill chunk, so each of the 8 experts is almost surely chosen by some
  # token; the model is deterministic, so "not chosen" would fail the same way every time.
  set(layer 2)
  set(expert 5)
  set(prompt_ids "5,17,99,123,7,300,42,250,11,64,480,3,77,150,222,333,444,12,91,500,8,260,199,31,400,55,170,290,13,360,88,245")
  set(new_tokens 4)

  function(k3_run out_code out_stdout out_stderr)
    execute_process(COMMAND ${EXE} ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE o ERROR_VARIABLE e)
    set(${out_code} "${code}" PARENT_SCOPE)
    set(${out_stdout} "${o}" PARENT_SCOPE)
    set(${out_stderr} "${e}" PARENT_SCOPE)
    string(REPLACE ";" " " shown_args "${ARGN}")
    set(last_shown "k3host ${shown_args}\n--- exit code: ${code}\n--- stdout:\n${o}\n--- stderr:\n${e}" PARENT_SCOPE)
  endfunction()

  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")

  # tiny in one shard.
  file(READ "${SRC}/configs/models/tiny.yaml" geo)
  string(FIND "${geo}" "shard_size: 64KiB" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "configs/models/tiny.yaml has no 'shard_size: 64KiB' line to turn into one shard")
  endif()
  string(REPLACE "shard_size: 64KiB" "shard_size: 64MiB" geo "${geo}")
  file(WRITE "${WORK}/tiny-one-shard.yaml" "${geo}")
  k3_run(code out err make-model -g "${WORK}/tiny-one-shard.yaml" -o "${WORK}/model")
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "make-model failed\n${last_shown}")
  endif()
  file(GLOB shards "${WORK}/model/*.safetensors")
  list(LENGTH shards n_shards)
  if(NOT n_shards EQUAL 1)
    message(FATAL_ERROR "expected tiny in one shard, got ${n_shards}: ${shards}")
  endif()

  set(common --config "${SRC}/configs/default.yaml"
      --set "model.path=${WORK}/model" --set model.generate_if_missing=false
      --set memory.trunk_gb=0.00005 --set memory.expert_cache_gb=0.00005 --set memory.context=64
      --set job.max_new_tokens=${new_tokens} --set job.stop_at_eos=false --set threads=1
      --ids "${prompt_ids}")

  # A report's generated ids, and a check that the run really streamed experts.
  function(k3_report file out_ids)
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "no report written: ${file}\n${last_shown}")
    endif()
    file(READ "${file}" j)
    string(JSON n LENGTH "${j}" generated_ids)
    if(NOT n EQUAL ${new_tokens})
      message(FATAL_ERROR "${file}: ${n} generated ids, expected ${new_tokens} (the run did not finish)\n${last_shown}")
    endif()
    string(JSON streaming GET "${j}" plan streaming)
    string(JSON expert_bytes GET "${j}" bytes_read experts)
    string(JSON requests GET "${j}" expert_requests)
    string(JSON hits GET "${j}" expert_hits)
    if(NOT streaming OR expert_bytes EQUAL 0 OR requests EQUAL hits)
      message(FATAL_ERROR "${file}: the experts did not stream (streaming ${streaming}, expert bytes ${expert_bytes}, "
                          "requests ${requests}, hits ${hits})")
    endif()
    string(JSON ids GET "${j}" generated_ids)
    set(${out_ids} "${ids}" PARENT_SCOPE)
  endfunction()

  if(CASE STREQUAL "recoverable")
    k3_run(code clean_out err ${common} --set storage.plugin=posix --quiet
           --out "${WORK}/clean.json" --dump-logits "${WORK}/clean.logits" --save-state "${WORK}/clean.state")
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "the clean run failed\n${last_shown}")
    endif()
    # A sound state resumes (the control of the unsound case).
    k3_run(code out err --config "${SRC}/configs/default.yaml" --set "model.path=${WORK}/model"
           --set model.generate_if_missing=false --set memory.context=64 --set job.max_new_tokens=2 --set threads=1
           --quiet --load-state "${WORK}/clean.state")
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "resuming the clean run's state: expected exit 0\n${last_shown}")
    endif()
    k3_report("${WORK}/clean.json" clean_ids)
    foreach(fault eio_rate short_read_rate)
      k3_run(code out err ${common} --set storage.plugin=faulty
             --set "storage.params={inner: posix, ${fault}: 1, transient: true, seed: 3}" --quiet
             --out "${WORK}/${fault}.json" --dump-logits "${WORK}/${fault}.logits")
      if(NOT code EQUAL 0)
        message(FATAL_ERROR "recoverable faults (${fault}=1, transient): expected exit code 0\n${last_shown}")
      endif()
      if(NOT out STREQUAL clean_out)
        message(FATAL_ERROR "recoverable faults (${fault}): output differs from the clean run\n--- clean:\n${clean_out}\n${last_shown}")
      endif()
      k3_report("${WORK}/${fault}.json" ids)
      if(NOT ids STREQUAL clean_ids)
        message(FATAL_ERROR "recoverable faults (${fault}): generated ids ${ids}, clean run ${clean_ids}")
      endif()
      execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/clean.logits" "${WORK}/${fault}.logits"
                      RESULT_VARIABLE differ)
      if(NOT differ EQUAL 0)
        message(FATAL_ERROR "recoverable faults (${fault}): the prompt's logits differ from the clean run")
      endif()
    endforeach()
  elseif(CASE STREQUAL "unrecoverable")
    # The absolute file offset of the expert's w2 packed weights, from the safetensors header
    # (u64 little-endian header length, JSON header, data; data_offsets are relative to the data).
    file(READ "${shards}" len_hex LIMIT 8 HEX)
    set(len_be "")
    foreach(i RANGE 14 0 -2)
      string(SUBSTRING "${len_hex}" ${i} 2 byte)
      string(APPEND len_be "${byte}")
    endforeach()
    math(EXPR header_len "0x${len_be}")
    file(READ "${shards}" header OFFSET 8 LIMIT ${header_len})
    string(REGEX MATCH "\"[^\"]*layers\\.${layer}\\.block_sparse_moe\\.experts\\.${expert}\\.w2\\.weight_packed\"" name "${header}")
    if(NOT name)
      message(FATAL_ERROR "no tensor for layer ${layer} expert ${expert} w2 in ${shards}")
    endif()
    string(REGEX REPLACE "^\"(.*)\"$" "\\1" name "${name}")
    string(JSON begin GET "${header}" "${name}" data_offsets 0)
    math(EXPR offset "8 + ${header_len} + ${begin}")

    k3_run(code out err ${common} --set storage.plugin=faulty
           --set "storage.params={inner: posix, fail_offsets: '${offset}'}" --out "${WORK}/fail.json"
           --save-state "${WORK}/fail.state")
    if(NOT code EQUAL 4)
      message(FATAL_ERROR "an unrecoverable expert read: expected exit code 4\n${last_shown}")
    endif()
    k3_report("${WORK}/fail.json" ids)  # the run finished
    set(named "\\[k3host\\] error: routed expert failed: layer ${layer} expert ${expert}: read failed after 3 attempts: [^\n]*offset ${offset}")
    if(NOT err MATCHES "${named}")
      message(FATAL_ERROR "stderr does not name layer ${layer} expert ${expert} (offset ${offset})\n${last_shown}")
    endif()
    # Only that expert failed.
    string(REGEX MATCHALL "routed expert failed: layer [0-9]+ expert [0-9]+" failures "${err}")
    list(REMOVE_DUPLICATES failures)
    if(NOT failures STREQUAL "routed expert failed: layer ${layer} expert ${expert}")
      message(FATAL_ERROR "other experts failed too: ${failures}\n${last_shown}")
    endif()
    if(NOT err MATCHES "routed expert read\\(s\\) failed; their contributions were zero")
      message(FATAL_ERROR "no summary line on stderr\n${last_shown}")
    endif()
    file(READ "${WORK}/fail.json" j)
    string(JSON n_failures LENGTH "${j}" expert_failures)
    if(n_failures EQUAL 0)
      message(FATAL_ERROR "the report lists no expert_failures\n${last_shown}")
    endif()
    # The state it saved is marked unsound: resuming it is refused naming the reason ...
    set(resume --config "${SRC}/configs/default.yaml" --set "model.path=${WORK}/model"
        --set model.generate_if_missing=false --set memory.context=64 --set job.max_new_tokens=2
        --set threads=1 --quiet)
    k3_run(code out err ${resume} --load-state "${WORK}/fail.state")
    if(NOT code EQUAL 2 OR NOT err MATCHES "fail\\.state: the state is unsound \\(1 routed expert read\\(s\\) failed[^\n]*layer ${layer} expert ${expert}")
      message(FATAL_ERROR "resuming an unsound state: expected exit 2 naming why it is unsound\n${last_shown}")
    endif()
    # ... unless accepted, and what it saves then stays unsound.
    k3_run(code out err ${resume} --load-state "${WORK}/fail.state" --set job.accept_unsound_state=true
           --save-state "${WORK}/again.state")
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "an accepted unsound state: expected exit 0\n${last_shown}")
    endif()
    k3_run(code out err ${resume} --load-state "${WORK}/again.state")
    if(NOT code EQUAL 2 OR NOT err MATCHES "again\\.state: the state is unsound")
      message(FATAL_ERROR "a state saved from an unsound one must stay unsound\n${last_shown}")
    endif()
  else()
    message(FATAL_ERROR "CASE must be unrecoverable or recoverable (got '${CASE}')")
  endif()
  file(REMOVE_RECURSE "${WORK}")
  return()
endif()

foreach(case unrecoverable recoverable)
  if(case STREQUAL "unrecoverable")
    set(title "cli-exit4: an unrecoverable expert read finishes the run, names the layer and expert, exit 4")
  else()
    set(title "cli-exit4: recoverable faults (one failure per read) exit 0 with the clean run's output")
  endif()
  add_test(NAME "${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR}
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cli-exit4-${case} -DCASE=${case} -P ${CMAKE_CURRENT_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()
