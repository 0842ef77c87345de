# cmake -DK3HOST=... -DSRC=<source dir> -DOUT=<scratch dir> -P check_live_vs_sim.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

function(k3 expect_code)
  execute_process(COMMAND ${K3HOST} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_code)
    message(FATAL_ERROR "k3host ${ARGN}\nexit ${rc}, expected ${expect_code}\n${out}\n${err}")
  endif()
  set(k3_out "${out}" PARENT_SCOPE)
  set(k3_err "${err}" PARENT_SCOPE)
endfunction()

k3(0 make-model -g tiny -o ${OUT}/tiny --force)
# tiny: 5 MoE layers x 8 experts, top-2; 0.00005 GB = 12 slots of 4 kB: the cache evicts.
set(run --config ${SRC}/configs/default.yaml --set model.path=${OUT}/tiny --set model.generate_if_missing=false
        --set job.max_new_tokens=8 --set job.prefill_chunk=4
        --set job.stop_at_eos=false --set memory.trunk_gb=1000 --set memory.expert_cache_gb=0.00005 -q
        --set cache.prefetch.depth=0)  # the simulator does not prefetch

set(prompt --ids 3,14,15,92,65,35,89,79,32,38)
k3(0 ${run} ${prompt} --set cache.policy=lru --set trace.out=${OUT}/run.k3trace --out ${OUT}/lru.json)
k3(0 ${run} ${prompt} --set cache.policy=belady --set cache.future=${OUT}/run.k3trace --out ${OUT}/belady.json)

file(READ ${OUT}/lru.json lru)
file(READ ${OUT}/belady.json belady)
string(JSON streaming GET "${lru}" plan streaming)
string(JSON slots GET "${lru}" plan expert_slots)
if(NOT streaming OR slots GREATER_EQUAL 40)
  message(FATAL_ERROR "the run did not stream a small expert cache (streaming ${streaming}, ${slots} slots)")
endif()
string(JSON live_lru GET "${lru}" expert_hits)
string(JSON live_belady GET "${belady}" expert_hits)
string(JSON requests GET "${lru}" expert_requests)

k3(0 sim ${OUT}/run.k3trace --policy lru,belady --capacity ${slots} --json ${OUT}/sim.json)
message("${k3_out}")
file(READ ${OUT}/sim.json sim)
foreach(i 0 1)
  string(JSON policy GET "${sim}" results ${i} policy)
  string(JSON sim_${policy} GET "${sim}" results ${i} hits)
  string(JSON sim_requests GET "${sim}" results ${i} requests)
endforeach()
if(NOT sim_requests EQUAL requests)
  message(FATAL_ERROR "the trace holds ${sim_requests} requests, the run made ${requests}")
endif()
if(NOT live_lru EQUAL sim_lru OR NOT live_belady EQUAL sim_belady)
  message(FATAL_ERROR "live and simulated hits differ at ${slots} slots: lru live ${live_lru} sim ${sim_lru}, "
                      "belady live ${live_belady} sim ${sim_belady} (of ${requests} requests)")
endif()
if(NOT live_belady GREATER live_lru)
  message(FATAL_ERROR "belady (${live_belady} hits) does not beat lru (${live_lru}) at ${slots} slots")
endif()
message(STATUS "${slots} slots, ${requests} requests: lru ${live_lru} hits, belady ${live_belady} hits, live == sim")

# Refusals: no future; another prompt's trace.
k3(2 ${run} ${prompt} --set cache.policy=belady)
if(NOT k3_err MATCHES "cache.future" OR NOT k3_err MATCHES "trace.out=FILE")
  message(FATAL_ERROR "belady without cache.future: unexpected message\n${k3_err}")
endif()
k3(2 ${run} --ids 3,14,15,92,65,36,89,79,32,38 --set cache.policy=belady --set cache.future=${OUT}/run.k3trace)
if(NOT k3_err MATCHES "run.k3trace: the trace is of another prompt")
  message(FATAL_ERROR "another prompt's trace: unexpected message\n${k3_err}")
endif()
