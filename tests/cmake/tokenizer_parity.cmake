# Tokenizer parity: k3host tokenize (the tiktoken plugin) against npm tiktoken / js-tiktoken
# for cl100k and o200k, and against the official Kimi pattern run by the Rust regex engine
# (npm tiktoken's WASM) and by Node's /v regex. SKIP (77) when node or the npm packages are
# missing; see tests/oracle/parity.cjs.
add_test(NAME "tokenizer: parity with npm tiktoken (cl100k, o200k, kimi pattern)"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/oracle/run_parity.sh $<TARGET_FILE:k3host> ${PROJECT_BINARY_DIR}/test-tmp/tokenizer-parity)
set_tests_properties("tokenizer: parity with npm tiktoken (cl100k, o200k, kimi pattern)" PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 600
  # no-sanitizer: 40 s here, 155 s under ASan, for a comparison of ids; the tokenizer's code
  # runs under the sanitizers in its unit tests and its two fuzz harnesses (round-trip oracle).
  LABELS "oracle;no-sanitizer")
