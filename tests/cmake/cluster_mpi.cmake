# CLI tests of a model split over ranks (docs/cluster.md) with real `mpirun -np N
# --oversubscribe` on loopback, on the shipped fortune model (8 layers):
#   exact     ids, logits bits and reports of 2, 3 and 4 ranks (auto and uneven ranges, a rank
#             whose own budget streams, greedy, sampled, every sampler setting with drafts,
#             speculative, over TCP) are one process's, byte for byte; so are a --prompts
#             batch's on 2 and 3 ranks, with a pass in flight per rank; the last rank picks
#             and sends back only the ids;
#   failures  a rank whose storage fails (faulty; also under a batch with a pass in flight per
#             rank), a rank whose pipeline is refused, rank 0's own failure: every rank ends, with the right exit code and a line naming the
#             rank and the reason, and rank 0 writes its report;
#   killed    a rank killed with -9 mid-run: every rank ends within 10 s (cluster_kill.sh);
#   chat      `k3host chat` under mpirun (its input piped through mpirun to rank 0): on 2 and 3
#             ranks, greedy and sampled, the history file is one process's byte for byte; it
#             has no state file, and --resume feeds the conversation again to the same bytes;
#   config    bad cluster keys are refused (exit 2) at their place.
# Skipped (ctest SKIP) when mpirun or the mpi transport plugin is missing.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it is one:
#   cmake -DEXE=k3host -DMPIRUN=mpirun -DPLUGIN=k3-transport-mpi.so -DWORK=<dir> -DCASE=exact -P cluster_mpi.cmake
if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT MPIRUN OR NOT EXISTS "${PLUGIN}")
    message("SKIP: mpirun or the mpi transport plugin is missing (apt install openmpi-bin libopenmpi-dev)")
    return()
  endif()
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")
  # CI runs as root; Open MPI refuses root unless told.
  set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
  set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
  # One thread per rank: the ranks share the machine's cores.
  set(base --config presets/laptop.yaml -t 1 -q)
  # run(<exit code> <ranks or 0 for one process> args...): k3host ${base} args..., with the
  # file ${stdin} as its input when that is set.
  function(run code ranks)
    if(ranks EQUAL 0)
      set(cmd ${EXE} ${base} ${ARGN})
    else()
      set(cmd ${MPIRUN} -np ${ranks} --oversubscribe ${MCA} ${EXE} ${base} --set cluster.transport=mpi ${ARGN})
    endif()
    set(input)
    if(stdin)
      set(input INPUT_FILE "${stdin}")
    endif()
    execute_process(COMMAND ${cmd} ${input} RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
    if(NOT got EQUAL code)
      message(FATAL_ERROR "${cmd}: exit ${got}, expected ${code}\n${out}\n${err}")
    endif()
    set(out "${out}" PARENT_SCOPE)
    set(err "${err}" PARENT_SCOPE)
  endfunction()
  function(json_ids file var)
    file(READ "${file}" text)
    string(JSON ids GET "${text}" generated_ids)
    string(REGEX REPLACE "[ \n]" "" ids "${ids}")
    set(${var} "${ids}" PARENT_SCOPE)
  endfunction()
  # same(<name> <ranks> args...): the run's ids and logits are the one-process reference's.
  function(same name ranks)
    run(0 ${ranks} ${ARGN} --out "${WORK}/${name}.json" --set "job.dump_logits=${WORK}/${name}.logits")
    json_ids("${WORK}/${name}.json" got)
    if(NOT got STREQUAL ref_ids)
      message(FATAL_ERROR "${name}: ids ${got}, one process ${ref_ids}")
    endif()
    file(SHA256 "${WORK}/${name}.logits" h)
    if(NOT h STREQUAL ref_logits)
      message(FATAL_ERROR "${name}: the prompt's logits differ from one process's")
    endif()
    string(LENGTH "${got}" n)
    if(n LESS 10)
      message(FATAL_ERROR "${name}: hardly any ids: ${got}")
    endif()
  endfunction()

  if(CASE STREQUAL "exact")
    # The last rank picks: "penalized" sends every sampler setting through the wire and
    # needs the ids before each drafted row there (the repeat penalty's context).
    foreach(mode greedy sampled penalized speculative)
      if(mode STREQUAL "greedy")
        set(args -p "Life is" -n 12 --draft-max 0)
      elseif(mode STREQUAL "sampled")
        set(args -p "Love is" -n 12 --temp 0.8 --seed 5 --draft-max 0)
      elseif(mode STREQUAL "penalized")
        set(args -p "Love is a" -n 16 --temp 0.9 --seed 3 --top-k 40 --top-p 0.95 --min-p 0.02 --repeat-penalty 1.3
                 --repeat-last-n 8 --draft-max 4)
      else()
        set(args -p "The best thing about a boolean is" -n 16 --draft-max 4)
      endif()
      run(0 0 ${args} --out "${WORK}/ref-${mode}.json" --set "job.dump_logits=${WORK}/ref-${mode}.logits")
      json_ids("${WORK}/ref-${mode}.json" ref_ids)
      file(SHA256 "${WORK}/ref-${mode}.logits" ref_logits)
      same(${mode}-2 2 ${args})
      same(${mode}-3-uneven 3 ${args} --set cluster.layers=0-0,1-5,6-7)
      # Rank 2's own budget streams its trunk and experts (per-rank override).
      same(${mode}-4-streamed 4 ${args} --set cluster.ranks.2.memory.trunk_gb=0.0001
           --set cluster.ranks.2.memory.expert_cache_gb=0.0001)
    endforeach()
    # The speculative runs did draft: otherwise they tested nothing more.
    foreach(mode speculative penalized)
      file(READ "${WORK}/${mode}-2.json" report)
      string(JSON verify GET "${report}" speculative verify_passes)
      if(verify EQUAL 0)
        message(FATAL_ERROR "the ${mode} run verified no drafts")
      endif()
    endforeach()
    # Only the picks come back from the last rank: a header and 4 bytes a pick each pass,
    # never a row of logits (vocab_size × 4 bytes). Its own log line counts what it sent.
    set(quiet_base ${base})
    set(base --config presets/laptop.yaml -t 1 --log-level info)
    run(0 3 -p "Life is" -n 12 --draft-max 0 --out "${WORK}/bytes.json")
    set(base ${quiet_base})
    string(REGEX MATCH "rank 0 sent [0-9]+ bytes in ([0-9]+) passes" found "${err}")
    set(passes "${CMAKE_MATCH_1}")
    string(REGEX MATCH "rank 2 sent ([0-9]+) bytes" found "${err}")
    set(last "${CMAKE_MATCH_1}")
    if(NOT passes OR NOT last)
      message(FATAL_ERROR "no byte counts in the ranks' logs:\n${err}")
    endif()
    math(EXPR least "${passes} * 48")
    math(EXPR most "48 + ${passes} * (48 + 4) + 48 + 256")  # hello, the passes, the stop
    if(passes LESS 12 OR last LESS least OR last GREATER most)
      message(FATAL_ERROR "the last rank sent ${last} bytes for ${passes} passes, not ${least}-${most}")
    endif()
    # A batch of prompts, 4 in flight, some sampled, drafting: rank 0 keeps a pass in
    # flight per rank (groups of sequences) and each prompt's ids are one process's.
    # Slots are reused: a prompt whose last pass was a verification hands its slot on.
    file(WRITE "${WORK}/prompts.jsonl"
         "{\"prompt\": \"Life is\"}\n{\"prompt\": \"Love is\"}\n{\"prompt\": \"The best thing about a boolean is\"}\n"
         "{\"prompt\": \"Q: What is\"}\n{\"prompt\": \"Once upon a time\"}\n"
         "{\"prompt\": \"In the beginning\", \"max_tokens\": 6}\n"
         "{\"prompt\": \"Love is\", \"temperature\": 0.8, \"seed\": 5}\n")
    set(batch --prompts "${WORK}/prompts.jsonl" --parallel 4 -n 10 --draft-max 4)
    function(batch_ids file var)
      file(STRINGS "${file}" lines)
      set(all "")
      foreach(line IN LISTS lines)
        string(JSON i GET "${line}" index)
        string(JSON ids GET "${line}" ids)
        string(REGEX REPLACE "[][ \n]" "" ids "${ids}")  # brackets would group a CMake list
        string(APPEND all "${i}:${ids}|")
      endforeach()
      set(${var} "${all}" PARENT_SCOPE)
    endfunction()
    run(0 0 ${batch} --results "${WORK}/batch-ref.jsonl")
    batch_ids("${WORK}/batch-ref.jsonl" ref_batch)
    string(REGEX MATCHALL "[0-9]+:[0-9]" nonempty "${ref_batch}")
    list(LENGTH nonempty n)
    if(NOT n EQUAL 7)
      message(FATAL_ERROR "the one-process batch did not generate for every prompt: ${ref_batch}")
    endif()
    foreach(ranks 2 3)
      run(0 ${ranks} ${batch} --results "${WORK}/batch-${ranks}.jsonl" --out "${WORK}/batch-${ranks}.json")
      batch_ids("${WORK}/batch-${ranks}.jsonl" got)
      if(NOT got STREQUAL ref_batch)
        message(FATAL_ERROR "batch on ${ranks} ranks: ${got}\none process: ${ref_batch}")
      endif()
      file(READ "${WORK}/batch-${ranks}.json" report)
      string(JSON flying GET "${report}" steps most_in_flight)
      if(flying LESS 2 OR flying GREATER ${ranks})
        message(FATAL_ERROR "batch on ${ranks} ranks: at most ${flying} passes in flight")
      endif()
    endforeach()
    # Over TCP instead of shared memory.
    set(MCA --mca btl self,tcp)
    same(speculative-tcp 3 -p "The best thing about a boolean is" -n 16 --draft-max 4)
    return()
  endif()

  if(CASE STREQUAL "failures")
    # The byte where layer 4's q_proj starts in its shard (safetensors: an 8-byte header
    # length, the header, then the data).
    set(model data/models/fortune)
    set(tensor language_model.model.layers.4.self_attn.q_proj.weight)
    file(READ "${model}/model.safetensors.index.json" index)
    string(JSON shard GET "${index}" weight_map ${tensor})
    file(READ "${model}/${shard}" len_hex LIMIT 8 HEX)
    set(header_len 0)
    foreach(i RANGE 7 0 -1)  # little-endian
      math(EXPR at "${i} * 2")
      string(SUBSTRING "${len_hex}" ${at} 2 byte)
      math(EXPR header_len "${header_len} * 256 + 0x${byte}")
    endforeach()
    file(READ "${model}/${shard}" header OFFSET 8 LIMIT ${header_len})
    string(JSON begin GET "${header}" ${tensor} data_offsets 0)
    math(EXPR offset "8 + ${header_len} + ${begin} + 16")
    # Rank 2 (layers 4-5) streams its trunk from a disk that fails on that tensor: the run
    # starts, then its first pass through rank 2 fails. Exit 1 on every rank, a line naming
    # rank 2 and the read, rank 0's report with it.
    run(1 4 -p "Life is" -n 8 --out "${WORK}/faulty.json" --set cluster.ranks.2.storage.plugin=faulty
        --set cluster.ranks.2.storage.params.fail_offsets=${offset} --set cluster.ranks.2.memory.trunk_gb=0.0001
        --set cluster.ranks.2.memory.expert_cache_gb=0.0001)
    if(NOT err MATCHES "rank 2: [^\n]*q_proj[^\n]*injected EIO")
      message(FATAL_ERROR "no line names rank 2 and its read failure:\n${err}")
    endif()
    file(READ "${WORK}/faulty.json" report)
    string(JSON failure GET "${report}" failure)
    string(JSON code GET "${report}" exit_code)
    if(NOT failure MATCHES "^rank 2: " OR NOT code EQUAL 1)
      message(FATAL_ERROR "rank 0's report: exit ${code}, failure '${failure}'")
    endif()
    # The same with a batch of prompts, a pass in flight per rank when rank 2 fails: every
    # pass in flight is answered with the failure, and every rank still ends with exit 1.
    file(WRITE "${WORK}/prompts.txt" "Life is\nLove is\nQ: What is\nOnce upon a time\nIn the beginning\n")
    run(1 4 --prompts "${WORK}/prompts.txt" --parallel 4 -n 8 --out "${WORK}/faulty-batch.json"
        --set cluster.ranks.2.storage.plugin=faulty --set cluster.ranks.2.storage.params.fail_offsets=${offset}
        --set cluster.ranks.2.memory.trunk_gb=0.0001 --set cluster.ranks.2.memory.expert_cache_gb=0.0001)
    file(READ "${WORK}/faulty-batch.json" report)
    string(JSON failure GET "${report}" failure)
    string(JSON flying GET "${report}" steps most_in_flight)
    if(NOT failure MATCHES "rank 2: [^\n]*injected EIO" OR flying LESS 2)
      message(FATAL_ERROR "the batch's report: failure '${failure}', ${flying} passes in flight at most")
    endif()
    # Rank 2's disk failing while it loads (config.json): the same, before the first pass.
    run(1 4 -p "Life is" -n 8 --set cluster.ranks.2.storage.plugin=faulty --set cluster.ranks.2.storage.params.eio_rate=1
        --set cluster.ranks.2.storage.params.transient=false)
    if(NOT err MATCHES "rank 2: [^\n]*config.json[^\n]*injected EIO")
      message(FATAL_ERROR "no line names rank 2 and its failure to load:\n${err}")
    endif()
    # Rank 1's pipeline is refused (its own cache policy does not exist): exit 2 everywhere.
    run(2 3 -p "Life is" -n 8 --set cluster.ranks.1.cache.policy=nosuch)
    if(NOT err MATCHES "rank 1: [^\n]*nosuch")
      message(FATAL_ERROR "no line names rank 1 and its refusal:\n${err}")
    endif()
    # Rank 1 cannot plan its range: 64 sequences of 1M positions each (43 GB of MLA cache in
    # its two MLA layers, 3 and 7, of the fortune model) where rank 0 plans two. Exit 3 on every rank. Checked where
    # that is more than this machine has.
    file(STRINGS /proc/meminfo avail REGEX "^MemAvailable:")
    string(REGEX MATCH "[0-9]+" avail_kb "${avail}")
    if(avail_kb LESS 40000000)
      file(WRITE "${WORK}/prompts.txt" "Life is\nLove is\n")
      run(3 2 --prompts "${WORK}/prompts.txt" -n 4 --parallel 2 --set cluster.layers=0-2,3-7
          --set cluster.ranks.1.serve.parallel=64
          --set cluster.ranks.1.memory.context=1048576)
      if(NOT err MATCHES "rank 1: the memory plan needs [^\n]* but [^\n]* is available")
        message(FATAL_ERROR "no line names rank 1 and its plan:\n${err}")
      endif()
    endif()
    # Rank 0 fails (its prompt file is missing): the others end with its code.
    run(2 3 -f "${WORK}/no-such-prompt.txt" -n 8)
    if(NOT err MATCHES "rank 1 ends with exit code 2: rank 0: ")
      message(FATAL_ERROR "rank 1 does not say rank 0 ended the run:\n${err}")
    endif()
    return()
  endif()

  if(CASE STREQUAL "chat")
    # chat(<exit code> <ranks or 0> <input> args...): k3host chat with <input> piped in.
    function(chat code ranks input)
      file(WRITE "${WORK}/stdin.txt" "${input}")
      set(base chat --config presets/laptop.yaml -t 1 --max-tokens 10)
      set(stdin "${WORK}/stdin.txt")
      run(${code} ${ranks} ${ARGN})
      set(out "${out}" PARENT_SCOPE)
      set(err "${err}" PARENT_SCOPE)
    endfunction()
    # same_file(<what> <file> <reference>): byte for byte, and a conversation in it.
    function(same_file what file ref)
      file(SHA256 "${file}" a)
      file(SHA256 "${ref}" b)
      file(READ "${file}" text)
      if(NOT a STREQUAL b)
        file(READ "${ref}" want)
        message(FATAL_ERROR "${what}: ${file} differs from one process's\n--- got:\n${text}\n--- one process:\n${want}")
      endif()
      string(REGEX MATCHALL "\"role\":\"assistant\"" answers "${text}")
      list(LENGTH answers n)
      if(n LESS 2)
        message(FATAL_ERROR "${what}: fewer than two answers in ${file}:\n${text}")
      endif()
    endfunction()
    set(turns "Life is\nLove is\n")
    foreach(mode greedy sampled)
      set(args)
      if(mode STREQUAL "sampled")
        set(args --set job.sampling.temperature=0.8 --set job.sampling.seed=5)
      endif()
      chat(0 0 "${turns}" ${args} --history "${WORK}/${mode}-ref.jsonl")
      chat(0 2 "${turns}" ${args} --history "${WORK}/${mode}-2.jsonl")
      same_file("${mode}, 2 ranks" "${WORK}/${mode}-2.jsonl" "${WORK}/${mode}-ref.jsonl")
      if(EXISTS "${WORK}/${mode}-2.jsonl.state")
        message(FATAL_ERROR "${mode}, 2 ranks: a state file was written beside the history")
      endif()
      if(NOT err MATCHES "no model state with it: the model is split over ranks")
        message(FATAL_ERROR "${mode}, 2 ranks: the chat does not say the history has no state:\n${err}")
      endif()
      chat(0 3 "${turns}/save ${WORK}/${mode}-saved.jsonl\n" ${args} --set cluster.layers=0-0,1-5,6-7)
      same_file("${mode}, 3 uneven ranks, /save" "${WORK}/${mode}-saved.jsonl" "${WORK}/${mode}-ref.jsonl")
      if(NOT out MATCHES "saved [^\n]*${mode}-saved.jsonl; no model state with it")
        message(FATAL_ERROR "${mode}, 3 ranks: /save does not say it wrote no state:\n${out}")
      endif()
    endforeach()
    # Resumed: one process loads its state, the ranks feed the conversation again; the
    # next answer is the same bytes.
    file(COPY_FILE "${WORK}/greedy-ref.jsonl" "${WORK}/resume-ref.jsonl")
    file(COPY_FILE "${WORK}/greedy-ref.jsonl.state" "${WORK}/resume-ref.jsonl.state")
    chat(0 0 "Truth is\n" --resume "${WORK}/resume-ref.jsonl")
    file(COPY_FILE "${WORK}/greedy-2.jsonl" "${WORK}/resume-2.jsonl")
    chat(0 2 "Truth is\n" --resume "${WORK}/resume-2.jsonl")
    same_file("resumed on 2 ranks" "${WORK}/resume-2.jsonl" "${WORK}/resume-ref.jsonl")
    return()
  endif()

  if(CASE STREQUAL "killed")
    execute_process(COMMAND bash "${CMAKE_CURRENT_LIST_DIR}/cluster_kill.sh" "${MPIRUN}" "${EXE}" "${WORK}"
                    RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
    if(NOT got EQUAL 0)
      message(FATAL_ERROR "cluster_kill.sh: exit ${got}\n${out}\n${err}")
    endif()
    return()
  endif()

  # CASE config: refused before anything loads, at the key.
  run(2 2 -p "Life is" --set cluster.layers=0-3,5-7)
  if(NOT err MATCHES "cluster.layers: range 2 starts at layer 5 where layer 4 is next")
    message(FATAL_ERROR "a gap in cluster.layers:\n${err}")
  endif()
  run(2 3 -p "Life is" --set cluster.layers=0-3,4-7)
  if(NOT err MATCHES "cluster.layers: 2 ranges for a job of 3 ranks")
    message(FATAL_ERROR "too few ranges:\n${err}")
  endif()
  run(2 2 -p "Life is" --set cluster.ranks.1.memory.trunk_gbb=1)
  if(NOT err MATCHES "cluster.ranks.1.memory.trunk_gbb: unknown key 'memory.trunk_gbb' \\(did you mean 'memory.trunk_gb'\\?\\)")
    message(FATAL_ERROR "a misspelt per-rank key:\n${err}")
  endif()
  run(2 2 -p "Life is" --set cluster.ranks.1.memory.trunk_gb=-1)
  if(NOT err MATCHES "memory.trunk_gb")
    message(FATAL_ERROR "a bad per-rank value:\n${err}")
  endif()
  run(2 2 -p "Life is" --set cluster.ranks.x.memory.trunk_gb=1)
  if(NOT err MATCHES "cluster.ranks.x: expected a rank number")
    message(FATAL_ERROR "a rank that is not a number:\n${err}")
  endif()
  # A later rank that plans fewer sequences than rank 0 runs at once is refused at load.
  file(WRITE "${WORK}/two.txt" "Life is\nLove is\n")
  run(2 2 --prompts "${WORK}/two.txt" --parallel 2 -n 2 --set cluster.ranks.1.serve.parallel=1)
  if(NOT err MATCHES "rank 1: its plan holds 1 sequences at once, rank 0 runs 2")
    message(FATAL_ERROR "a rank planning fewer sequences than rank 0:\n${err}")
  endif()
  run(2 2 -p "Life is" --set job.save_state=${WORK}/s.state)
  if(NOT err MATCHES "job.save_state: not supported with a model split over ranks")
    message(FATAL_ERROR "a state file with a split model:\n${err}")
  endif()
  # Alone, not under mpirun: a job of one rank.
  execute_process(COMMAND ${EXE} ${base} -p "Life is" --set cluster.transport=mpi RESULT_VARIABLE got
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT got EQUAL 2 OR NOT err MATCHES "cluster.transport: this process is a job of one rank")
    message(FATAL_ERROR "one rank: exit ${got}\n${err}")
  endif()
  # bench and chat run in one process: a pipeline asking for ranks is refused.
  execute_process(COMMAND ${EXE} bench --config presets/laptop.yaml --set cluster.transport=mpi -n 2 RESULT_VARIABLE got
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT got EQUAL 2 OR NOT err MATCHES "cluster.transport: a model split over ranks runs the batch job")
    message(FATAL_ERROR "bench with cluster.transport: exit ${got}\n${err}")
  endif()
  return()
endif()

find_program(K3_MPIRUN mpirun)
foreach(c exact failures killed chat config)
  if(c STREQUAL "exact")
    set(title "cluster-mpi: 2, 3 and 4 ranks (uneven, streamed, TCP; greedy, sampled, penalized, speculative; a batch with passes in flight) give one process's ids and logits bits, the last rank sending back only its picks")
  elseif(c STREQUAL "failures")
    set(title "cluster-mpi: a rank whose storage fails or whose pipeline is refused ends every rank with its code and a line naming it")
  elseif(c STREQUAL "killed")
    set(title "cluster-mpi: a rank killed with -9 ends every rank within 10 s")
  elseif(c STREQUAL "chat")
    set(title "cluster-mpi: chat on 2 and 3 ranks writes one process's history, greedy, sampled and resumed")
  else()
    set(title "cluster-mpi: bad cluster keys are refused at their place")
  endif()
  add_test(NAME "${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DMPIRUN=${K3_MPIRUN}
                   -DPLUGIN=${K3_PLUGIN_OUTPUT_DIR}/k3-transport-mpi.so
                   -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cluster-mpi-${c} -DCASE=${c} -P ${CMAKE_CURRENT_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # no-sanitizer: Open MPI as Debian ships it is not built for the sanitizers: LeakSanitizer
  # reports its runtime's own allocations at exit, and its shared-memory transport writes
  # memory AddressSanitizer never saw allocated, so an instrumented k3host under mpirun
  # fails for reasons of the library's. The stage code these runs drive (the pass split,
  # the per-range plan and loader) runs under the sanitizers in tests/unit/model and
  # tests/unit/streaming.
  set_tests_properties("${title}" PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP: mpirun or the mpi transport plugin"
                                             LABELS no-sanitizer)
endforeach()
