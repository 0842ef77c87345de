# CLI tests of where checkpoint bytes come from and of a wrong model.path.
#   counted:  a real generation with model.path: counted://<folder>, through the `counted`
#             fixture storage plugin (tests/fixtures/plugins/storage_counted.cpp), the only
#             thing that can open such URIs. Every checkpoint file (config.json, the index
#             json, each shard, tiktoken.model, tokenizer_config.json) must have been opened
#             through it, and the output equals a plain posix run's. Then the same with
#             listing off (as over http): the index names the shards; without the index,
#             exit 2 naming it. A packed trunk at a counted:// URL is read through it too.
#   missing:  a model.path that does not exist (a typo, a counted:// URL, the demo folder
#             named by another pipeline file) is exit 2 naming it with a hint, and nothing
#             is generated there.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it runs one case:
#   cmake -DEXE=k3host -DSRC=<source dir> -DPLUGINS=<test-plugins/counted> -DWORK=<scratch> -DCASE=counted|missing -P cli_storage.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  function(k3_run out_code out_stdout out_stderr)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env K3_PLUGIN_PATH=${PLUGINS} ${EXE} ${ARGN}
                    RESULT_VARIABLE code OUTPUT_VARIABLE o ERROR_VARIABLE e)
    set(${out_code} "${code}" PARENT_SCOPE)
    set(${out_stdout} "${o}" PARENT_SCOPE)
    set(${out_stderr} "${e}" PARENT_SCOPE)
    string(REPLACE ";" " " shown_args "${ARGN}")
    set(last_shown "k3host ${shown_args}\n--- exit code: ${code}\n--- stdout:\n${o}\n--- stderr:\n${e}" PARENT_SCOPE)
  endfunction()

  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")
  set(common --config "${SRC}/configs/default.yaml" --set threads=1 --set memory.context=64
      --set job.max_new_tokens=3 --set job.stop_at_eos=false --quiet)

  if(CASE STREQUAL "counted")
    k3_run(code out err make-model -g tiny -o "${WORK}/model")
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "make-model failed\n${last_shown}")
    endif()
    file(GLOB shards RELATIVE "${WORK}/model" "${WORK}/model/*.safetensors")
    list(LENGTH shards n_shards)
    if(n_shards LESS 2)
      message(FATAL_ERROR "expected tiny in several shards, got ${n_shards}")
    endif()
    set(files config.json model.safetensors.index.json tiktoken.model tokenizer_config.json ${shards})
    foreach(f IN LISTS files)
      if(NOT EXISTS "${WORK}/model/${f}")
        message(FATAL_ERROR "make-model wrote no ${f}")
      endif()
    endforeach()

    # The reference: posix over the plain folder, with a text prompt (so the tokenizer runs).
    k3_run(code plain_out err ${common} --set "model.path=${WORK}/model" --out "${WORK}/plain.json")
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "the posix run failed\n${last_shown}")
    endif()

    foreach(listing true false)
      set(log "${WORK}/opens-${listing}.log")
      k3_run(code out err ${common} --set "model.path=counted://${WORK}/model" --set storage.plugin=counted
             --set "storage.params={log: '${log}', list: ${listing}}" --out "${WORK}/counted-${listing}.json")
      if(NOT code EQUAL 0)
        message(FATAL_ERROR "the counted:// run (list: ${listing}) failed\n${last_shown}")
      endif()
      if(NOT out STREQUAL plain_out)
        message(FATAL_ERROR "the counted:// run (list: ${listing}) printed other text than the posix run\n"
                            "--- posix:\n${plain_out}\n${last_shown}")
      endif()
      file(READ "${WORK}/plain.json" plain_json)
      file(READ "${WORK}/counted-${listing}.json" counted_json)
      string(JSON plain_ids GET "${plain_json}" generated_ids)
      string(JSON counted_ids GET "${counted_json}" generated_ids)
      string(JSON n LENGTH "${counted_json}" generated_ids)
      if(NOT n EQUAL 3 OR NOT counted_ids STREQUAL plain_ids)
        message(FATAL_ERROR "counted:// run (list: ${listing}): generated ids ${counted_ids}, posix run ${plain_ids}")
      endif()
      string(JSON model GET "${counted_json}" model)
      if(NOT model STREQUAL "counted://${WORK}/model")
        message(FATAL_ERROR "the report names the model '${model}', expected counted://${WORK}/model")
      endif()
      file(STRINGS "${log}" opened)
      foreach(f IN LISTS files)
        list(FIND opened "counted://${WORK}/model/${f}" at)
        if(at EQUAL -1)
          string(REPLACE ";" "\n" shown "${opened}")
          message(FATAL_ERROR "list: ${listing}: ${f} was never opened through the storage plugin; opened:\n${shown}")
        endif()
      endforeach()
    endforeach()

    # A packed trunk at a counted:// URL: trunk.json and trunk.bin come through the plugin too.
    k3_run(code out err pack-trunk "${WORK}/model" "${WORK}/packed")
    if(NOT code EQUAL 0)
      message(FATAL_ERROR "pack-trunk failed\n${last_shown}")
    endif()
    set(log "${WORK}/opens-packed.log")
    k3_run(code out err ${common} --set "model.path=counted://${WORK}/model" --set storage.plugin=counted
           --set "model.packed_trunk=counted://${WORK}/packed" --set "storage.params={log: '${log}'}"
           --out "${WORK}/packed.json")
    if(NOT code EQUAL 0 OR NOT out STREQUAL plain_out)
      message(FATAL_ERROR "the counted:// run with a packed trunk failed or printed other text than the posix run\n"
                          "--- posix:\n${plain_out}\n${last_shown}")
    endif()
    file(STRINGS "${log}" opened)
    foreach(f trunk.json trunk.bin)
      list(FIND opened "counted://${WORK}/packed/${f}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "${f} of the packed trunk was never opened through the storage plugin")
      endif()
    endforeach()

    # Listing off and no index json: the shards cannot be found, exit 2 naming the index.
    file(REMOVE "${WORK}/model/model.safetensors.index.json")
    k3_run(code out err ${common} --set "model.path=counted://${WORK}/model" --set storage.plugin=counted
           --set "storage.params={log: '${WORK}/opens-noindex.log', list: false}")
    if(NOT code EQUAL 2 OR NOT err MATCHES "counted://${WORK}/model/model\\.safetensors\\.index\\.json: required")
      message(FATAL_ERROR "no listing and no index: expected exit 2 naming the index json\n${last_shown}")
    endif()
    # config.json missing through the plugin: exit 2 naming its URI.
    file(REMOVE "${WORK}/model/config.json")
    k3_run(code out err ${common} --set "model.path=counted://${WORK}/model" --set storage.plugin=counted
           --set "storage.params={log: '${WORK}/opens-noconfig.log'}")
    if(NOT code EQUAL 2 OR NOT err MATCHES "counted://${WORK}/model: no checkpoint there")
      message(FATAL_ERROR "no config.json: expected exit 2 naming the model\n${last_shown}")
    endif()
  elseif(CASE STREQUAL "missing")
    # A typo: exit 2 naming the path, with the make-model hint; nothing written there.
    k3_run(code out err ${common} --set "model.path=${WORK}/modles/demo")
    if(NOT code EQUAL 2)
      message(FATAL_ERROR "a missing model.path: expected exit code 2\n${last_shown}")
    endif()
    if(NOT err MATCHES "${WORK}/modles/demo: no checkpoint there" OR NOT err MATCHES "k3host make-model")
      message(FATAL_ERROR "the error does not name the path and the make-model hint\n${last_shown}")
    endif()
    if(EXISTS "${WORK}/modles")
      message(FATAL_ERROR "something was written at the wrong model.path ${WORK}/modles")
    endif()
    # generate_if_missing does not extend to other folders.
    k3_run(code out err ${common} --set "model.path=${WORK}/other" --set model.generate_if_missing=true)
    if(NOT code EQUAL 2 OR EXISTS "${WORK}/other")
      message(FATAL_ERROR "generate_if_missing with another model.path: expected exit 2 and nothing written\n${last_shown}")
    endif()
    # A URL the storage plugin cannot find.
    k3_run(code out err ${common} --set "model.path=counted://${WORK}/nothing" --set storage.plugin=counted
           --set "storage.params={log: '${WORK}/opens.log'}")
    if(NOT code EQUAL 2 OR NOT err MATCHES "counted://${WORK}/nothing: no checkpoint there")
      message(FATAL_ERROR "a missing counted:// model: expected exit 2 naming the URL\n${last_shown}")
    endif()
    # Another pipeline file's ../models/demo is not the demo location of configs/default.yaml.
    file(MAKE_DIRECTORY "${WORK}/mine")
    file(WRITE "${WORK}/mine/pipeline.yaml" "extends: ${SRC}/configs/default.yaml\nmodel:\n  path: ../models/demo\n")
    k3_run(code out err --config "${WORK}/mine/pipeline.yaml" --set threads=1 --quiet)
    if(NOT code EQUAL 2 OR EXISTS "${WORK}/models")
      message(FATAL_ERROR "another pipeline's ../models/demo: expected exit 2 and nothing written\n${last_shown}")
    endif()
    if(NOT err MATCHES "only the demo location of configs/default.yaml")
      message(FATAL_ERROR "the error does not say that only the demo location is generated\n${last_shown}")
    endif()
  else()
    message(FATAL_ERROR "CASE must be counted or missing (got '${CASE}')")
  endif()
  file(REMOVE_RECURSE "${WORK}")
  return()
endif()

foreach(case counted missing)
  if(case STREQUAL "counted")
    set(title "cli-storage: a counted:// checkpoint is read only through the storage plugin, every file, same output")
  else()
    set(title "cli-storage: a model.path that does not exist is exit 2 naming it; nothing is generated there")
  endif()
  add_test(NAME "${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR}
                   -DPLUGINS=${CMAKE_BINARY_DIR}/test-plugins/counted
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cli-storage-${case} -DCASE=${case} -P ${CMAKE_CURRENT_LIST_FILE})
endforeach()
