# CLI tests of the rule "bytes that are not the model's are refused" (docs/architecture.md,
# "Checkpoint identity" and "Every byte that reaches a computation is checked"), with the
# commands of the audit that found each hole:
#   other-checkpoint: two checkpoints of one architecture, `make-model -g tiny --seed 1` and
#       `--seed 2`, the second given the first's config.json (the same config.json and shard
#       headers, other weights: a fine-tune).
#       A trunk packed from the first, a state saved by a run of it and a trace recorded by a
#       run of it are each refused by a run of the second: exit 2 naming the file and both
#       identities; each is accepted by a run of the first, with its own ids.
#   flipped-pack: one flipped byte in trunk.bin, of a raw and of a coded pack, in a layer run,
#       an embedding row the prompt reads, a row of lm_head and the final norm (the global runs
#       a coded pack keeps raw), each with the trunk, the embedding and lm_head streaming: exit
#       1 naming trunk.bin, the run, the tensor and the offset of the bytes that differ.
#   tier-report: a tier filled by a run, one byte of a block flipped, a second run: the ids of
#       a plain run, and the block dropped and fetched again is counted in the report's
#       storage_counters.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it runs one case:
#   cmake -DEXE=k3host -DSRC=<source dir> -DWORK=<scratch> -DPY=<python3> -DCASE=<case> -P cli_identity.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")
  set(common --config "${SRC}/configs/default.yaml" --set model.generate_if_missing=false --set threads=1
      --set memory.context=64 --set job.max_new_tokens=4 --set job.stop_at_eos=false --ids 5,17 --quiet)
  # Everything streams: the trunk ring, the experts, embedding rows and lm_head in row chunks.
  set(streamed --set memory.trunk_gb=0.00005 --set memory.expert_cache_gb=0.00005 --set memory.stream_embedding=true)

  function(make_models)
    foreach(seed 1 2)
      k3_run(ARGS make-model -g tiny --seed ${seed} -o "${WORK}/m${seed}")
      k3_expect_code(0)
    endforeach()
  endfunction()

  # The identity a run of checkpoint `dir` reports, and its generated ids.
  function(identity_of dir out_identity out_ids)  # not `out`: k3_run sets that
    k3_run(ARGS ${common} --set "model.path=${dir}" --out "${WORK}/id.json")
    k3_expect_code(0)
    file(READ "${WORK}/id.json" j)
    string(JSON id ERROR_VARIABLE no_identity GET "${j}" checkpoint identity)  # checked by the caller
    string(JSON gen GET "${j}" generated_ids)
    set(${out_identity} "${id}" PARENT_SCOPE)
    set(${out_ids} "${gen}" PARENT_SCOPE)
  endfunction()

  # Flips one byte of `file` at `offset` (CMake cannot write arbitrary bytes).
  function(flip file offset)
    execute_process(COMMAND "${PY}" -c
      "import sys\nf=open(sys.argv[1],'r+b')\nf.seek(int(sys.argv[2]))\nb=f.read(1)\nf.seek(int(sys.argv[2]))\nf.write(bytes([b[0]^0x10]))"
      "${file}" "${offset}" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "cannot flip byte ${offset} of ${file}")
    endif()
  endfunction()

  if(CASE STREQUAL "other-checkpoint")
    make_models()
    # As a fine-tune: config.json byte for byte the same (make-model records its seed there;
    # m2 gets m1's), the shard headers the same, other weights. Only the sampled tensor bytes
    # of the identity tell the two apart.
    file(COPY_FILE "${WORK}/m1/config.json" "${WORK}/m2/config.json")
    file(GLOB shards1 RELATIVE "${WORK}/m1" "${WORK}/m1/*.safetensors")
    foreach(shard IN LISTS shards1)
      foreach(m m1 m2)
        file(READ "${WORK}/${m}/${shard}" head_${m} LIMIT 64 HEX)
      endforeach()
      if(NOT head_m1 STREQUAL head_m2)
        message(FATAL_ERROR "${shard}: the shards of seeds 1 and 2 should begin alike (the same header)")
      endif()
    endforeach()
    identity_of("${WORK}/m1" id1 ids1)
    identity_of("${WORK}/m2" id2 ids2)
    if(ids1 STREQUAL ids2)
      message(FATAL_ERROR "seeds 1 and 2 should be other weights: the same ids ${ids1}")
    endif()

    # A packed trunk of m1.
    k3_run(ARGS pack-trunk "${WORK}/m1" "${WORK}/p1")
    k3_expect_code(0)
    set(pack_out "${out}")
    k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m2" --set "model.packed_trunk=${WORK}/p1")
    k3_expect_code(2)
    k3_expect("the refusal" err "p1/trunk.json: packed from checkpoint .*m1 \\(checkpoint identity ${id1}\\), but this run's checkpoint .*m2 has identity ${id2}")
    k3_expect("pack-trunk names the identity" pack_out "checkpoint identity ${id1}")
    k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m1" --set "model.packed_trunk=${WORK}/p1"
           --out "${WORK}/p1.json")
    k3_expect_code(0)
    file(READ "${WORK}/p1.json" j)
    string(JSON got GET "${j}" generated_ids)
    if(NOT got STREQUAL ids1)
      k3_fail("m1 with its own pack: ids ${got}, without it ${ids1}")
    endif()

    # A state saved by a run of m1.
    k3_run(ARGS ${common} --set "model.path=${WORK}/m1" --save-state "${WORK}/s1.k3state")
    k3_expect_code(0)
    k3_run(ARGS ${common} --set "model.path=${WORK}/m2" --load-state "${WORK}/s1.k3state")
    k3_expect_code(2)
    k3_expect("the refusal" err "s1.k3state: saved by a run of checkpoint identity ${id1}, but this run's checkpoint .*m2 has identity ${id2}")
    k3_run(ARGS ${common} --set "model.path=${WORK}/m1" --load-state "${WORK}/s1.k3state")
    k3_expect_code(0)

    # A trace recorded by a run of m1, as the future of a belady run of m2.
    k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m1" --set "trace.out=${WORK}/t1.k3trace")
    k3_expect_code(0)
    if(EXISTS "${SRC}/plugins/cache/belady")
      k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m2" --set cache.policy=belady
             --set "cache.future=${WORK}/t1.k3trace")
      k3_expect_code(2)
      k3_expect("the refusal" err "t1.k3trace: the trace is of another checkpoint: recorded with checkpoint identity ${id1}, this run has ${id2}")
      k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m1" --set cache.policy=belady
             --set "cache.future=${WORK}/t1.k3trace")
      k3_expect_code(0)
    endif()
    # The report names the identity the refusals named, and so does `k3host plan`.
    if(id1 STREQUAL "" OR id1 STREQUAL id2 OR NOT id1 MATCHES "^[0-9a-f]+$")
      message(FATAL_ERROR "the reports' checkpoint.identity: '${id1}' for m1, '${id2}' for m2")
    endif()
    k3_run(ARGS plan --from-checkpoint --config "${SRC}/configs/default.yaml" --set "model.path=${WORK}/m1")
    k3_expect_code(0)
    k3_expect("plan --from-checkpoint" out "checkpoint identity ${id1}")

  elseif(CASE STREQUAL "flipped-pack")
    make_models()
    foreach(codec none bf16-zstd)
      k3_run(ARGS pack-trunk --codec ${codec} "${WORK}/m1" "${WORK}/p-${codec}")
      k3_expect_code(0)
      file(READ "${WORK}/p-${codec}/trunk.json" manifest)
      # [tensor, row]: the byte flipped is byte 1 of that row (or of the tensor); the message
      # names the offset of the row (or the tensor) it lies in. The global runs, which a coded
      # pack keeps raw, and a layer run (a coded layer's blocks carry the codec's own
      # checksums too, tested in tests/unit/pack_trunk).
      set(targets "language_model.model.embed_tokens.weight;17" "language_model.lm_head.weight;3"
                  "language_model.model.norm.weight;0")
      if(codec STREQUAL "none")
        list(APPEND targets "language_model.model.layers.1.input_layernorm.weight;0")
      endif()
      set(i 0)
      list(LENGTH targets n)
      while(i LESS n)
        list(GET targets ${i} want)
        math(EXPR i "${i} + 1")
        list(GET targets ${i} row)
        math(EXPR i "${i} + 1")
        # Where trunk.json puts it.
        set(kind "")
        foreach(k layers globals)
          string(JSON runs LENGTH "${manifest}" ${k})
          math(EXPR last "${runs} - 1")
          foreach(r RANGE ${last})
            string(JSON tensors LENGTH "${manifest}" ${k} ${r} tensors)
            math(EXPR tlast "${tensors} - 1")
            foreach(x RANGE ${tlast})
              string(JSON name GET "${manifest}" ${k} ${r} tensors ${x} name)
              if(name STREQUAL want)
                set(kind ${k})
                set(run ${r})
                set(tensor ${x})
              endif()
            endforeach()
          endforeach()
        endforeach()
        if(kind STREQUAL "")
          message(FATAL_ERROR "${want} is in no run of ${WORK}/p-${codec}/trunk.json")
        endif()
        set(name "${want}")
        string(JSON file_off GET "${manifest}" ${kind} ${run} file_off)
        string(JSON off GET "${manifest}" ${kind} ${run} tensors ${tensor} off)
        string(JSON nbytes GET "${manifest}" ${kind} ${run} tensors ${tensor} nbytes)
        string(JSON dims LENGTH "${manifest}" ${kind} ${run} tensors ${tensor} shape)
        set(row_bytes 0)
        if(dims EQUAL 2)
          string(JSON rows GET "${manifest}" ${kind} ${run} tensors ${tensor} shape 0)
          math(EXPR row_bytes "${nbytes} / ${rows}")
        endif()
        if(kind STREQUAL "layers")
          set(run_name "layer ${run}")
        else()
          string(JSON run_name GET "${manifest}" ${kind} ${run} name)
        endif()
        math(EXPR at "${file_off} + ${off} + ${row} * ${row_bytes}")
        math(EXPR flipped "${at} + 1")
        file(REMOVE_RECURSE "${WORK}/damaged")
        file(COPY "${WORK}/p-${codec}/" DESTINATION "${WORK}/damaged")
        flip("${WORK}/damaged/trunk.bin" ${flipped})
        k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m1" --set "model.packed_trunk=${WORK}/damaged")
        if(NOT code EQUAL 1)
          k3_fail("${codec} pack, ${name} (run '${run_name}') flipped at ${flipped}: expected exit 1")
        endif()
        string(REPLACE "." "\\." name_re "${name}")
        k3_expect("the message" err "damaged/trunk\\.bin: run '${run_name}', tensor '${name_re}'.* at offset ${at} have xxh3 [0-9a-f]+, trunk\\.json says [0-9a-f]+: the packed trunk is damaged")
      endwhile()
    endforeach()

  elseif(CASE STREQUAL "tier-report")
    k3_run(ARGS make-model -g tiny -o "${WORK}/m")
    k3_expect_code(0)
    k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m" --out "${WORK}/plain.json")
    k3_expect_code(0)
    set(tiered --set storage.plugin=tiered --set "storage.params={dir: '${WORK}/tier', inner: posix, block_kb: 16}")
    k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m" ${tiered} --out "${WORK}/cold.json")
    k3_expect_code(0)
    file(GLOB_RECURSE blocks "${WORK}/tier/*.blk")
    list(LENGTH blocks n_blocks)
    if(n_blocks LESS 2)
      k3_fail("the cold run left ${n_blocks} blocks in the tier")
    endif()
    list(SORT blocks)
    list(GET blocks 0 block)
    flip("${block}" 100)
    k3_run(ARGS ${common} ${streamed} --set "model.path=${WORK}/m" ${tiered} --out "${WORK}/warm.json")
    k3_expect_code(0)
    file(READ "${WORK}/plain.json" pj)
    file(READ "${WORK}/warm.json" wj)
    string(JSON want GET "${pj}" generated_ids)
    string(JSON got GET "${wj}" generated_ids)
    if(NOT got STREQUAL want)
      k3_fail("the warm tiered run's ids ${got} differ from posix's ${want}")
    endif()
    string(JSON refetched ERROR_VARIABLE missing GET "${wj}" storage_counters tier_blocks_damaged_refetched)
    string(JSON hit ERROR_VARIABLE missing_hit GET "${wj}" storage_counters tier_hit_bytes)
    if(missing OR missing_hit OR NOT refetched EQUAL 1 OR hit EQUAL 0)
      k3_fail("the report's storage_counters should count the damaged block once and bytes from the tier: "
              "tier_blocks_damaged_refetched '${refetched}' (${missing}), tier_hit_bytes '${hit}'")
    endif()
  else()
    message(FATAL_ERROR "CASE must be other-checkpoint, flipped-pack or tier-report (got '${CASE}')")
  endif()
  file(REMOVE_RECURSE "${WORK}")
  return()
endif()

find_program(K3_IDENTITY_PYTHON3 python3)
foreach(case other-checkpoint flipped-pack tier-report)
  if(case STREQUAL "other-checkpoint")
    set(title "cli-identity: a pack, a state and a trace of another checkpoint of the same architecture are refused naming both identities")
  elseif(case STREQUAL "flipped-pack")
    if(NOT K3_IDENTITY_PYTHON3)
      message(STATUS "cli-identity flipped-pack: no python3 to flip a byte; not registered")
      continue()
    endif()
    set(title "cli-identity: a flipped byte of a raw or coded pack, layer or global run, is exit 1 naming trunk.bin, the run and the offset")
  else()
    if(NOT K3_IDENTITY_PYTHON3 OR NOT TARGET k3-storage-tiered)
      continue()
    endif()
    set(title "cli-identity: a tier block flipped on disk is fetched again, the ids unchanged, and the report counts it")
  endif()
  add_test(NAME "${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DSRC=${PROJECT_SOURCE_DIR} -DPY=${K3_IDENTITY_PYTHON3}
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cli-identity-${case} -DCASE=${case} -P ${CMAKE_CURRENT_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()
