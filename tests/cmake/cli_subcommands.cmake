# CLI tests of what the subcommands tell and take (core/cli/cmd_*.cpp): each --help ends with its
# own truth about Ctrl-C and exit codes, not the main job's; `tokenize` reads -p TEXT and
# --ids IDS like the main job does, and its --decode takes ids separated by spaces or commas;
# a misspelt preset name suggests the closest.
include(${CMAKE_CURRENT_LIST_DIR}/lib/cli_check.cmake)

k3_cli_test("cli-subcommands: the main job's --help ends with its Ctrl-C and exit codes" 0
  ARGS --help
  STDOUT "Ctrl-C \\(or SIGTERM\\) stops a run at the next token[^\n]*5 interrupted\\.\n$")
k3_cli_test("cli-subcommands: serve --help says a signal stops it with exit 0" 0
  ARGS serve --help
  STDOUT "SIGTERM stops the server[^\n]*and it exits 0"
  STDOUT_NOT "stops a run at the next token")
k3_cli_test("cli-subcommands: tokenize --help says it keeps no state, and names K3's special tokens" 0
  ARGS tokenize --help
  STDOUT "<\\|end_of_msg\\|>.*It keeps no state: Ctrl-C ends it at once"
  STDOUT_NOT "stops a run at the next token|im_end|5 interrupted")
k3_cli_test("cli-subcommands: sim --help says it keeps no state" 0
  ARGS sim --help
  STDOUT "It keeps no state"
  STDOUT_NOT "stops a run at the next token|5 interrupted")
foreach(sub plan make-model pack-trunk plugins chat)
  k3_cli_test("cli-subcommands: ${sub} --help has its own exit codes" 0
    ARGS ${sub} --help
    STDOUT "Exit codes: 0 "
    STDOUT_NOT "stops a run at the next token")
endforeach()
# Through sh: stdin, and comparing two runs.
add_test(NAME "cli-subcommands: tokenize -p TEXT encodes TEXT, as stdin would"
         COMMAND sh -c "a=$(\"$0\" tokenize -p 'Life is' -q) && b=$(printf 'Life is' | \"$0\" tokenize -q) && \
                        echo \"-p: '$a' stdin: '$b'\" && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ]"
                 $<TARGET_FILE:k3host>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME "cli-subcommands: tokenize --decode takes spaces or commas, and --ids decodes"
         COMMAND sh -c "ids=$(printf 'Life is a good' | \"$0\" tokenize -q) && \
                        commas=$(echo \"$ids\" | tr ' ' ',') && \
                        a=$(echo \"$ids\" | \"$0\" tokenize -d -q) && b=$(echo \"$commas\" | \"$0\" tokenize -d -q) && \
                        c=$(\"$0\" tokenize --ids \"$commas\" -q) && \
                        echo \"ids '$ids': '$a' '$b' '$c'\" && [ \"$a\" = 'Life is a good' ] && [ \"$b\" = \"$a\" ] && [ \"$c\" = \"$a\" ]"
                 $<TARGET_FILE:k3host>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
k3_cli_test("cli-subcommands: tokenize refuses two inputs rather than ignore one" 2
  ARGS tokenize -p x --ids 1
  STDERR "tokenize: --prompt and --ids both give the input")
k3_cli_test("cli-subcommands: a misspelt preset name suggests the closest" 2
  ARGS --config lapotp --print-config
  STDERR "^\\[k3host\\] error: pipeline 'lapotp' not found \\(did you mean 'laptop'\\?\\): ")
