# k3host chat's defaults and long conversations, on the real binary with its input piped
# (libedit reads a pipe as it reads a terminal): thinking follows the model (off on the shipped
# fortune model, which then answers in its response channel; on for a synthetic one), a
# resumed conversation keeps its thinking setting unless a flag says otherwise, --resume
# reads its file before the model loads, answers have a default limit the screen shows, and a
# conversation that fills the context drops its oldest turns (said on screen, marked in the
# history file) and goes on, resumable.
#
# Included by tests/CMakeLists.txt it registers the tests; run as
#   cmake -DEXE=k3host -DWORK=<scratch dir> -DMODEL=<tiny checkpoint> -DCASE=<case> -P cli_chat_turns.cmake
# (in the source folder) it is one of them.
if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  include(${CMAKE_CURRENT_LIST_DIR}/lib/k3_run.cmake)
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}")

  # k3host chat with INPUT as its standard input, bounded in time.
  function(chat_run)
    cmake_parse_arguments(R "" "INPUT" "ARGS" ${ARGN})
    file(WRITE "${WORK}/stdin.txt" "${R_INPUT}")
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=K3_LOG_LEVEL --unset=K3_PLUGIN_PATH ${EXE} chat ${R_ARGS}
                    INPUT_FILE "${WORK}/stdin.txt" TIMEOUT 120 RESULT_VARIABLE c OUTPUT_VARIABLE o ERROR_VARIABLE e)
    set(code "${c}" PARENT_SCOPE)
    set(out "${o}" PARENT_SCOPE)
    set(err "${e}" PARENT_SCOPE)
    string(REPLACE ";" " " a "${R_ARGS}")
    set(shown "k3host chat ${a}\n--- stdin:\n${R_INPUT}\n--- exit code: ${c}\n--- stdout:\n${o}\n--- stderr:\n${e}"
        PARENT_SCOPE)
  endfunction()

  # The last line of FILE that holds TEXT (string operations only: a CMake list would join
  # records at their JSON brackets).
  function(last_record out file text)
    file(READ "${file}" all)
    string(FIND "${all}" "${text}" at REVERSE)
    if(at EQUAL -1)
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
    string(SUBSTRING "${all}" 0 ${at} before)
    string(FIND "${before}" "\n" start REVERSE)
    math(EXPR start "${start} + 1")
    string(SUBSTRING "${all}" ${start} -1 rest)
    string(FIND "${rest}" "\n" end)
    string(SUBSTRING "${rest}" 0 ${end} line)
    set(${out} "${line}" PARENT_SCOPE)
  endfunction()

  set(tiny --config presets/laptop.yaml --set "model.path=${MODEL}" --set threads=1)

  if(CASE STREQUAL "thinking")
    # The shipped model was trained without the think channel: thinking off, text in the answer.
    chat_run(ARGS --config presets/laptop.yaml --set threads=1 --history "${WORK}/f.jsonl" --max-tokens 24
             INPUT "Life is\n/help\n")
    k3_expect_code(0)
    k3_expect("the banner" out "k3host chat: [^\n]*/data/models/fortune \\| thinking off \\| answers up to 24 tokens \\|")
    k3_expect("/help" out "Answers are limited to 24 tokens \\(--max-tokens, /max-tokens\\)")
    k3_expect("/help" out "/think on\\|off +K3's thinking for the next answers \\(now off\\)")
    last_record(answer "${WORK}/f.jsonl" "\"role\":\"assistant\"")
    k3_expect("the answer's record" answer "\"thinking\":false")
    if(answer MATCHES "\"content\":\"\"")
      k3_fail("the shipped model's answer has no text: ${answer}")
    endif()
    # The default limit, as the banner says it.
    chat_run(ARGS ${tiny} INPUT "/quit\n")
    k3_expect_code(0)
    k3_expect("the banner" out "\\| thinking on \\| answers up to 1024 tokens \\|")

    # A conversation started with --no-think keeps it when resumed; a flag given then wins.
    set(h "${WORK}/t.jsonl")
    chat_run(ARGS ${tiny} --no-think --max-tokens 4 --history "${h}" INPUT "Hi there\n")
    k3_expect_code(0)
    k3_expect("the banner" out "\\| thinking off \\|")
    chat_run(ARGS ${tiny} --max-tokens 4 --resume "${h}" INPUT "More\n")
    k3_expect_code(0)
    k3_expect("the resumed banner" out "\\[loaded [^\n]*\n(.*\n)?k3host chat: [^\n]* \\| thinking off \\|")
    last_record(answer "${h}" "\"role\":\"assistant\"")
    k3_expect("the resumed answer" answer "\"thinking\":false")
    chat_run(ARGS ${tiny} --max-tokens 4 --think --resume "${h}" INPUT "Again\n")
    k3_expect_code(0)
    k3_expect("the banner with --think" out "k3host chat: [^\n]* \\| thinking on \\|")
    last_record(answer "${h}" "\"role\":\"assistant\"")
    k3_expect("the answer with --think" answer "\"thinking\":true")
    chat_run(ARGS ${tiny} --think --no-think INPUT "")
    k3_expect_code(2)
    k3_expect("stderr" err "--think and --no-think both given")

  elseif(CASE STREQUAL "resume-first")
    # --resume's file is read before the model loads: a missing or damaged one fails at once.
    foreach(kind missing damaged)
      set(h "${WORK}/${kind}.jsonl")
      if(kind STREQUAL "damaged")
        file(WRITE "${h}" "{\"role\":\"user\",\"content\":\"x\",\"ids\":[1]}\nnot json\n")
        set(says "${h}:2: not a JSON record")
      else()
        set(says "${h}: ")
      endif()
      chat_run(ARGS ${tiny} --resume "${h}" INPUT "More\n")
      k3_expect_code(2)
      k3_expect("stderr" err "\\[k3host\\] error: ${says}")
      if(err MATCHES "info: loading")
        k3_fail("--resume ${kind} file: refused only after the model loaded")
      endif()
    endforeach()

  elseif(CASE STREQUAL "full-context")
    # A context of 320 tokens, answers of up to 24, long messages: the oldest turns go.
    string(REPEAT "tell me more about the long and winding road " 3 long)
    set(h "${WORK}/full.jsonl")
    set(small ${tiny} --set memory.context=320 --max-tokens 24 --no-think)
    set(input "")
    foreach(i RANGE 1 5)
      string(APPEND input "${i}: ${long}\n")
    endforeach()
    chat_run(ARGS ${small} --history "${h}" INPUT "${input}/stats\n")
    k3_expect_code(0)
    k3_expect("the drop" out "\\[the context is full: dropped the oldest turn \\(2 messages, [0-9]+ tokens: \"1: tell me[^\n]*\"\\); the kept conversation is fed again, and [^\n]*full.jsonl marks them dropped\\]")
    string(REGEX MATCHALL "\n-- [0-9]+ tokens[^\n]*" statuses "${out}")  # not /stats' "last answer:"
    list(LENGTH statuses answered)
    if(NOT answered EQUAL 5)
      k3_fail("expected 5 answers, found ${answered}")
    endif()
    foreach(st IN LISTS statuses)
      if(NOT st MATCHES "context ([0-9]+)/320$" OR CMAKE_MATCH_1 GREATER 320)
        k3_fail("a status line beyond the context: ${st}")
      endif()
    endforeach()
    if(out MATCHES "fills the context")
      k3_fail("a message was refused instead of dropping old turns")
    endif()
    # The history keeps every message, the dropped ones marked, and resumes with its state.
    file(READ "${h}" text)
    string(REGEX MATCHALL "\n" ends "${text}")
    list(LENGTH ends n)
    if(NOT n EQUAL 10)
      k3_fail("expected 10 records (5 turns), found ${n}")
    endif()
    string(REGEX MATCH "^[^\n]*" first "${text}")
    k3_expect("the first record" first "\"dropped\":true")
    string(REGEX MATCH "[^\n]*\n$" last "${text}")
    if(last MATCHES "dropped")
      k3_fail("the last answer is marked dropped: ${last}")
    endif()
    if(NOT EXISTS "${h}.state")
      k3_fail("no model state next to the history")
    endif()
    chat_run(ARGS ${small} --resume "${h}" INPUT "6: ${long}\n")
    k3_expect_code(0)
    k3_expect("the resumed conversation" out "\\[loaded [^\n]*full.jsonl: [0-9]+ messages, [0-9]+ tokens, [1-9][0-9]* of them in the model state; [0-9]+ older messages were dropped when the context filled\\]")

  else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
  endif()
  return()
endif()

set(_k3_chat_turns_model ${CMAKE_BINARY_DIR}/test-tmp/cli-chat-turns/tiny)
add_test(NAME "cli-chat-turns: write the tiny model"
         COMMAND $<TARGET_FILE:k3host> make-model -g tiny -o ${_k3_chat_turns_model} --force -q)
set_tests_properties("cli-chat-turns: write the tiny model" PROPERTIES FIXTURES_SETUP k3_cli_chat_turns_model)

foreach(case_title IN ITEMS
    "thinking|thinking follows the model (off on the shipped one, which answers in text), a resumed chat keeps it unless a flag says otherwise, the answer limit is shown"
    "resume-first|--resume reads its file before the model loads: a missing or damaged history fails at once"
    "full-context|a conversation that fills the context drops its oldest turns, says which, marks them in the history and resumes")
  string(REPLACE "|" ";" parts "${case_title}")
  list(GET parts 0 case)
  list(GET parts 1 title)
  add_test(NAME "cli-chat-turns: ${title}"
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:k3host> -DWORK=${CMAKE_BINARY_DIR}/test-tmp/cli-chat-turns/${case}
                   -DMODEL=${_k3_chat_turns_model} -DCASE=${case} -P ${CMAKE_CURRENT_LIST_FILE}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties("cli-chat-turns: ${title}" PROPERTIES FIXTURES_REQUIRED k3_cli_chat_turns_model TIMEOUT 300)
endforeach()
