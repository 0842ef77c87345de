# k3host serve at the HTTP layer with the standard library's sockets and http.client
# (tests/serve/serve_limits.py) on the tiny checkpoint: the limits every client meets before
# a route or the API key (slow headers, header floods and field counts, connections per
# address and in all), JSON nested without bound, a POST without a body, message framing
# (Content-Length, Transfer-Encoding, 100-continue), a second server on the port, the
# options' ranges, disconnected and half-closed clients, IPv6, and the pipeline's file keys
# the server does not write. Each case runs its own servers on free loopback ports.
find_program(K3_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT K3_PYTHON3)
  find_program(K3_PYTHON3 python3)
endif()
set(k3_serve_limit_cases slowloris headers nesting nobody framing bind options disconnect ipv6 pipeline-files)
set(k3_serve_limit_names
  "slow headers are cut at the header deadline, connections per address and in all are bounded, others are served"
  "a 64 MB header flood is cut after the header limit without growing memory, oversize and too many fields get 431"
  "JSON nested deeper than 64 levels is refused with 400 (a 60,000-level tool schema), max_tokens names its bound"
  "a POST without a body gets 411 at once, not after the read timeout"
  "conflicting Content-Lengths and unknown transfer codings get 400, chunked bodies and 100-continue work"
  "a second server on a port in use exits 1 naming it"
  "every numeric option out of range exits 2 naming it"
  "a client that leaves stops its generation, a half-closed one gets its whole reply"
  "--host [::1] binds the IPv6 loopback and prints a bracketed URL"
  "the server says which of the pipeline's job files it does not write")
foreach(c n IN ZIP_LISTS k3_serve_limit_cases k3_serve_limit_names)
  set(name "serve-limits: ${n}")
  if(K3_PYTHON3)
    add_test(NAME "${name}"
      COMMAND ${K3_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/serve/serve_limits.py --exe $<TARGET_FILE:k3host>
              --src ${PROJECT_SOURCE_DIR} --work ${PROJECT_BINARY_DIR}/test-tmp/serve-limits-${c} --case ${c})
  else()
    add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} -E echo "SKIP: python3 is not installed")
    set_tests_properties("${name}" PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP")
  endif()
  set_tests_properties("${name}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "serve")
endforeach()
