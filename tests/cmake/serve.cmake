# k3host serve end to end, with the official OpenAI client (npm `openai`, installed into
# tests/serve/node_modules by tools/install-deps.sh --with-npm) and raw HTTP, on the tiny
# checkpoint: chat and text completions plain and streamed, prefix reuse against a cold
# server (same replies, cached tokens > 0), a cancelled stream and SIGINT mid-generation,
# the error table, the queue (one queued, one 429), continuous batching (requests of every
# kind decoded together reply exactly as each alone; a long prompt shares steps with a stream),
# and on the shipped fortune model, thinking off by default (text in content), a reply cut in
# the think channel marked, metrics rounded and the hit rate 1 (resident) or NaN (streaming,
# no request yet), and a model split over 2 and 3 ranks under mpirun (requests decoded
# together reply as one process alone; a rank whose disk fails ends the server with exit 1
# and a line naming it). Each case starts its own servers on free loopback ports and stops
# them with SIGINT. SKIP (77) without node or the package (cluster: without mpirun or the
# mpi transport plugin).
find_program(K3_NODE node)
find_program(K3_SERVE_MPIRUN mpirun)
set(k3_serve_cases chat reuse cancel errors queue shipped batch cluster)
set(k3_serve_names
  "OpenAI client: chat and text completions, plain and streamed, agree"
  "prefix reuse: follow-up turns resume from snapshots and equal a cold server's replies"
  "a cancelled stream ends its generation, SIGINT mid-generation exits 0"
  "errors: malformed JSON, bad params, oversize plain and chunked bodies, 404, API key"
  "queue: one request waits, the next gets 429"
  "the shipped model answers in content by default, a reply cut while thinking says so, metrics are rounded"
  "batch: requests decoded together reply as each alone, and a long prompt does not stall a stream"
  "cluster: a model split over 2 and 3 ranks serves requests together as one process alone, and a failing rank ends it")
foreach(c n IN ZIP_LISTS k3_serve_cases k3_serve_names)
  set(name "serve: ${n}")
  if(K3_NODE)
    add_test(NAME "${name}"
      COMMAND ${K3_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/serve/serve_test.mjs --exe $<TARGET_FILE:k3host>
              --src ${PROJECT_SOURCE_DIR} --work ${PROJECT_BINARY_DIR}/test-tmp/serve-${c} --case ${c}
              --mpirun "${K3_SERVE_MPIRUN}")
  else()
    add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} -E echo "SKIP: node is not installed")
    set_tests_properties("${name}" PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP")
  endif()
  set_tests_properties("${name}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "serve")
  if(c STREQUAL "cluster")
    # Open MPI as Debian ships it fails under the sanitizers for reasons of its own
    # (tests/cmake/cluster_mpi.cmake says which).
    set_tests_properties("${name}" PROPERTIES LABELS "serve;no-sanitizer")
  endif()
endforeach()
