# CLI tests of the http storage plugin against real loopback servers: nginx serving the
# tiny checkpoint (bit-identical to posix, resident and streamed), and a Python stdlib
# server injecting faults (500, reset mid-body, stall, truncated body, wrong Content-Range,
# 200 instead of 206, a changed ETag, missing or changing validators, another file's bytes,
# a redirect to another port, a stalled or killed server): retried and identical, or exit 4 (a routed expert) /
# exit 1 (the trunk) naming the URL, the range and the fault; a bearer token that reaches
# the server and no output; the tiered backend in front of http (cold, warm, capped,
# storage warm, kill -9 during a fill, corrupted blocks); https with a self-signed
# certificate (verified with ca_bundle, HTTP/2 on one connection, refused by default). The driver is tests/support/http_cli_test.py (its header says
# what each case checks); exit 77 = skipped (nginx not installed).
if(NOT TARGET k3-storage-http)
  message(STATUS "cli-http tests: the http storage plugin is not built (no libcurl)")
  return()
endif()
find_program(K3_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT K3_PYTHON3)
  find_program(K3_PYTHON3 python3)
endif()
if(NOT K3_PYTHON3)
  message(STATUS "cli-http tests: no python3")
  return()
endif()
set(k3_http_cases
  "nginx|a checkpoint served by nginx gives posix's text and ids, resident and streamed, bad keys refused"
  "transient|500, reset, stall and truncated body are retried and the ids are posix's"
  "permanent|each fault on an expert is exit 4 naming layer, expert, URL and range, on the trunk exit 1"
  "tiered|the tiered backend over http: cold and warm runs give posix's ids, storage warm fills it, kill -9 mid-fill never serves a torn block"
  "tls|https verified against a CA bundle gives posix's ids over one HTTP/2 connection, a self-signed server is refused by default"
  "secret|a bearer token from the environment reaches the server and appears in no output, report or trace"
  "validators|a file without validators is refused unless allowed, a validator missing or changed since open and another file's bytes are refused as changed"
  "redirect|a redirect to another origin carries no secret header, one within the origin keeps them"
  "deadline|a range stalled mid-run ends the run about read_timeout_s later, exit 1, with a retry warning and the report"
  "interrupt|SIGTERM during a stalled storage wait exits 5 within seconds with the report written and no state"
  "chat-interrupt|chat: Ctrl-C during a stalled storage wait stops the answer within seconds and the chat goes on"
  "serve-interrupt|serve: SIGINT during a stalled storage wait shuts the server down within seconds, exit 0"
  "killed|a server killed mid-run is exit 1 (trunk) or exit 4 (experts) with the report written"
  "names|shard names are percent-encoded in URLs, and names that are not plain file names are exit 2 everywhere")
foreach(entry IN LISTS k3_http_cases)
  string(FIND "${entry}" "|" bar)
  string(SUBSTRING "${entry}" 0 ${bar} case)
  math(EXPR from "${bar} + 1")
  string(SUBSTRING "${entry}" ${from} -1 title)
  add_test(NAME "cli-http: ${title}"
           COMMAND ${K3_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/support/http_cli_test.py --exe $<TARGET_FILE:k3host>
                   --src ${PROJECT_SOURCE_DIR} --work ${PROJECT_BINARY_DIR}/test-tmp/cli-http-${case} --case ${case})
  set_tests_properties("cli-http: ${title}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
