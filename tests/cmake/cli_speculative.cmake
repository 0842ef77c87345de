# CLI tests of exact speculative decoding (docs/speculative.md) on the shipped fortune
# model: the main job says what drafting did, the text is the same with it on and off, and
# a datastore or draft model that cannot be read is refused naming its key.
#
# Included by tests/CMakeLists.txt it registers the tests; run as `cmake -P` it checks the
# JSON report of a run drafting with the shipped draft model:
#   cmake -DEXE=k3host -DWORK=<scratch dir> -P cli_speculative.cmake   (in the source dir)
if(CMAKE_SCRIPT_MODE_FILE)
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")
  execute_process(COMMAND ${EXE} --config presets/laptop.yaml -q -n 40 --out "${WORK}/report.json"
                          --set job.speculative.draft_model=data/models/fortune-draft
                          --set job.speculative.draft_min_p=0.25
                  RESULT_VARIABLE code ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "k3host exited ${code}: ${err}")
  endif()
  file(READ "${WORK}/report.json" j)
  string(JSON path GET "${j}" speculative draft_model path)
  string(JSON min_p GET "${j}" speculative draft_model min_p)
  string(JSON ran GET "${j}" speculative draft_model forward_tokens)
  string(JSON resident GET "${j}" speculative draft_model resident_bytes)
  string(JSON proposed GET "${j}" speculative drafts_proposed)
  string(JSON accepted GET "${j}" speculative drafts_accepted)
  if(NOT path MATCHES "data/models/fortune-draft$")
    message(FATAL_ERROR "speculative.draft_model.path is '${path}'")
  endif()
  if(NOT min_p EQUAL 0.25)
    message(FATAL_ERROR "speculative.draft_model.min_p is '${min_p}', not the 0.25 set")
  endif()
  if(NOT ran GREATER 0 OR NOT resident GREATER 0)
    message(FATAL_ERROR "the draft model ran ${ran} tokens with ${resident} resident bytes")
  endif()
  if(NOT accepted GREATER 0 OR accepted GREATER proposed)
    message(FATAL_ERROR "drafts accepted ${accepted} of ${proposed}")
  endif()
  return()
endif()

include(${CMAKE_CURRENT_LIST_DIR}/lib/cli_check.cmake)

k3_cli_test("cli-speculative: the main job reports tokens per forward pass and drafts accepted" 0
  ARGS --config presets/laptop.yaml -n 48 --set job.speculative.max_draft=4
  STDOUT "speculative: 47 tokens fed back in [0-9]+ forward passes \\([0-9.]+ per pass\\) \\| drafts accepted [0-9]+ of [0-9]+")
# Through sh: the runs' text must be equal byte for byte, greedy and sampled, resident and at
# a streamed budget, drafting by lookup and by the shipped draft model (data/models/fortune-draft).
add_test(NAME "cli-speculative: the text is the same with drafting off and on, greedy and sampled, resident and streamed, by lookup and by a draft model"
         COMMAND sh -c "set -e; for extra in '' '--temp 0.9 --seed 5' '--set memory.trunk_gb=0.0001 --set memory.expert_cache_gb=0.0001'; do \
                          a=$(\"$0\" --config presets/laptop.yaml -q -n 40 $extra --set job.speculative.max_draft=0); \
                          for source in '' '--set job.speculative.draft_model=data/models/fortune-draft'; do \
                            b=$(\"$0\" --config presets/laptop.yaml -q -n 40 $extra --set job.speculative.max_draft=6 $source); \
                            [ -n \"$a\" ] && [ \"$a\" = \"$b\" ] || { echo \"differs ($extra $source): [$a] vs [$b]\"; exit 1; }; done; done"
                 $<TARGET_FILE:k3host>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
k3_cli_test("cli-speculative: a missing datastore is refused naming the key" 2
  ARGS --config presets/laptop.yaml -n 4 --set job.speculative.datastore=${CMAKE_BINARY_DIR}/test-tmp/no-such-corpus.txt
  STDERR "--set job.speculative.datastore=[^\n]*: job.speculative.datastore: [^\n]*no-such-corpus.txt: no such file")
k3_cli_test("cli-speculative: a run drafting with a datastore (the held-out text) finishes and reports its passes" 0
  ARGS --config presets/laptop.yaml -n 24 --set job.speculative.datastore=data/text/heldout.txt
  STDOUT "speculative: 23 tokens fed back in")
k3_cli_test("cli-speculative: a missing draft model is refused naming the key" 2
  ARGS --config presets/laptop.yaml -n 4 --set job.speculative.draft_model=${CMAKE_BINARY_DIR}/test-tmp/no-such-model
  STDERR "--set job.speculative.draft_model=[^\n]*: job.speculative.draft_model: [^\n]*no-such-model: no draft model there")
# The model as its own draft model proposes exactly what it picks: every draft is kept.
k3_cli_test("cli-speculative: the model drafting for itself keeps every draft and says what drafted" 0
  ARGS --config presets/laptop.yaml -n 24 --set job.speculative.draft_model=data/models/fortune
       --set job.speculative.adaptive=false
  STDOUT "drafts accepted [0-9]+ of [0-9]+ \\(100.0%\\) \\| drafted by [^\n]*data/models/fortune")
# The trained draft model guesses some of the model's greedy tokens (it was trained on the same
# text): drafts are kept, so a forward pass confirms more than one token.
k3_cli_test("cli-speculative: the shipped draft model's drafts are kept on greedy text" 0
  ARGS --config presets/laptop.yaml -n 40 --set job.speculative.draft_model=data/models/fortune-draft
  STDOUT "speculative: 39 tokens fed back in [0-9]+ forward passes \\([0-9.]+ per pass\\) \\| drafts accepted [1-9][0-9]* of [0-9]+ [^\n]*\\| drafted by [^\n]*data/models/fortune-draft")
add_test(NAME "cli-speculative: the JSON report names the draft model, its min_p, its resident bytes and tokens run"
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DWORK=${PROJECT_BINARY_DIR}/test-tmp/cli-speculative-report
                 -P ${CMAKE_CURRENT_LIST_FILE}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
