# CLI tests of the flags people type (-m -n -t -c --temp --top-p --seed -p -f --version):
# each stands for one pipeline key, shows in --print-config as coming from the command line,
# and is checked like any value of that key; and of what the main job says about the run
# (a synthetic model, resident or streaming, one unit system). core/cli/pipeline_flags.cpp.
include(${CMAKE_CURRENT_LIST_DIR}/lib/cli_check.cmake)

k3_cli_test("cli-flags: every short flag lands on its pipeline key, with the flag as origin" 0
  ARGS --config presets/laptop.yaml -m models/elsewhere -n 7 -t 1 -c 512 --temp 0.5 --top-p 0.9 --seed 3
       -p "two words" --print-config
  STDOUT "path: [^\n]*models/elsewhere +# --model models/elsewhere\n.*threads: 1 +# --threads 1\n.*context: 512 +# --context 512\n.*prompt: two words +# --prompt two words\n.*max_new_tokens: 7 +# --max-tokens 7\n.*temperature: 0.5 +# --temp 0.5\n.*top_p: 0.9 +# --top-p 0.9\n.*seed: 3 +# --seed 3\n")
k3_cli_test("cli-flags: the long names and -f work too" 0
  ARGS --config presets/laptop.yaml --model models/m --max-tokens 2 --threads 2 --context 64 --prompt x
       -f README.md --print-config
  STDOUT "prompt_file: [^\n]*README.md +# --file README.md\n")
k3_cli_test("cli-flags: --set after a flag for the same key wins, and says so" 0
  ARGS --config presets/laptop.yaml -n 7 --set job.max_new_tokens=9 --print-config
  STDOUT "max_new_tokens: 9 +# --set job.max_new_tokens=9\n")
k3_cli_test("cli-flags: a bad value is refused naming the flag" 2
  ARGS --config presets/laptop.yaml --temp warm --print-config
  STDERR "--temp warm: job.sampling.temperature: ")
k3_cli_test("cli-flags: an out-of-range value is refused naming the flag" 2
  ARGS --config presets/laptop.yaml --top-p 1.5 --print-config
  STDERR "--top-p 1.5: job.sampling.top_p: ")
# Through sh: an empty argument does not survive a CMake list.
add_test(NAME "cli-flags: an empty --prompt is refused, never the default prompt"
         COMMAND sh -c "out=$(\"$0\" --config presets/laptop.yaml --prompt '' -q 2>&1); rc=$?; echo \"$out\"; \
                        [ $rc -eq 2 ] && echo \"$out\" | grep -q -- '--prompt: empty value (an empty prompt'"
                 $<TARGET_FILE:k3host>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
# The model folder does not exist either: the prompt file is named first, so it was checked
# before the model was looked at.
k3_cli_test("cli-flags: a missing prompt file is refused before the model loads" 2
  ARGS --config presets/laptop.yaml -m ${CMAKE_BINARY_DIR}/test-tmp/no-such-model -f ${CMAKE_BINARY_DIR}/test-tmp/no-such-prompt.txt
  STDERR "--file [^\n]*no-such-prompt.txt: job.prompt_file: [^\n]*: no such file"
  STDERR_NOT "no-such-model")
k3_cli_test("cli-flags: a folder as the prompt file is refused" 2
  ARGS --config presets/laptop.yaml -f docs
  STDERR "--file docs: job.prompt_file: [^\n]*docs: a folder, not a text file")
k3_cli_test("cli-flags: -c is the context, and a pipeline file given to it says so" 2
  ARGS -c presets/laptop.yaml --print-config
  STDERR "--context presets/laptop.yaml: -c/--context is the context length in tokens; give the pipeline with --config presets/laptop.yaml")
k3_cli_test("cli-flags: --version names the version, commit, compiler and runnable kernel sets" 0
  ARGS --version
  STDOUT "^k3host [0-9]+\\.[0-9]+\\.[0-9]+\ncommit [0-9a-f]+[^\n]*\ncompiler (GCC|Clang) [^\n]*build\nkernel sets this CPU runs: [^\n]*scalar[^\n]*\\(chosen by default: [a-z0-9]+\\)")
# llama.cpp's habits (core/cli/pipeline_flags.cpp, habit_flags.cpp): its names for the same keys,
# -n -1, -cnv and -ngl taken whole, the flags that mean nothing here refused naming them.
k3_cli_test("cli-flags: llama.cpp's names land on their keys" 0
  ARGS --config presets/laptop.yaml --ctx-size 64 --n-predict 5 -s 3 --top-k 5 --min-p 0.1 --repeat-penalty 1.1
       --repeat-last-n 32 --temperature 0.5 --ignore-eos -b 16 -md models/draft --draft-max 3 --draft-p-min 0.1
       --print-config
  STDOUT "context: 64 +# --context 64\n.*max_new_tokens: 5 +# --max-tokens 5\n.*prefill_chunk: 16 +# --batch-size 16\n.*max_draft: 3 +# --draft-max 3\n.*draft_model: [^\n]*models/draft +# --model-draft models/draft\n.*draft_min_p: 0.1 +# --draft-p-min 0.1\n.*temperature: 0.5 +# --temp 0.5\n.*top_k: 5 +# --top-k 5\n.*min_p: 0.1 +# --min-p 0.1\n.*repeat_penalty: 1.1 +# --repeat-penalty 1.1\n.*repeat_last_n: 32 +# --repeat-last-n 32\n.*seed: 3 +# --seed 3\n.*stop_at_eos: false +# --ignore-eos\n")
k3_cli_test("cli-flags: -n -1 is as many tokens as the context holds; -n32 is -n 32" 0
  ARGS --config presets/laptop.yaml -n -1 -t1 --print-config
  STDOUT "threads: 1 +# --threads 1\n.*max_new_tokens: 1048576 +# --max-tokens -1\n")
k3_cli_test("cli-flags: --ids takes commas, spaces or both" 0
  ARGS --config presets/laptop.yaml --ids "5, 17 99,3" --print-config
  STDOUT "ids: \\[5, 17, 99, 3\\] +# --ids 5, 17 99,3\n")
# Through sh: chat reads stdin, which must be at its end at once (Ctrl-D: exit 0).
add_test(NAME "cli-flags: -cnv is one flag, never -c nv, and starts chat"
         COMMAND sh -c "out=$(\"$0\" --config presets/laptop.yaml -cnv --set memory.context=64 </dev/null 2>&1); rc=$?; \
                        echo \"$out\"; [ $rc -eq 0 ] && echo \"$out\" | grep -q '^k3host chat: .*fortune' && \
                        ! echo \"$out\" | grep -q 'error'"
                 $<TARGET_FILE:k3host>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
k3_cli_test("cli-flags: -i starts chat too, and a prompt with it is refused rather than lost" 2
  ARGS --config presets/laptop.yaml -i -p "hello"
  STDERR "\\[k3host\\] error: --conversation \\(-i, -cnv\\) starts k3host chat, which takes no prompt")
k3_cli_test("cli-flags: -ngl 99 is one flag, accepted with a note that there is no GPU" 0
  ARGS --config presets/laptop.yaml -ngl 99 -n 2 --no-warmup
  STDERR "\\[k3host\\] info: --n-gpu-layers 99: there is no GPU here. k3host runs every layer on the CPU\n"
  STDOUT "generated 2 tokens")
k3_cli_test("cli-flags: a single-dash flag of several letters is named whole" 2
  ARGS --config presets/laptop.yaml -cfoo --print-config
  STDERR "^\\[k3host\\] error: unknown flag -cfoo \\(a flag of several letters after one dash is read whole, never as -c foo\\)")
k3_cli_test("cli-flags: grouped flags without a value still work (-vv)" 0
  ARGS -vv --print-schema
  STDERR "log level trace \\(from -v\\)")
k3_cli_test("cli-flags: another engine's flag that means nothing here is refused, saying why" 2
  ARGS --config presets/laptop.yaml --mlock --print-config
  STDERR "^\\[k3host\\] error: --mlock: k3host does not lock memory")
k3_cli_test("cli-flags: another engine's multi-letter flag is refused whole, saying why" 2
  ARGS --config presets/laptop.yaml -tb 4 --print-config
  STDERR "^\\[k3host\\] error: -tb: -t/--threads sets the threads of the prompt and of generation alike")
k3_cli_test("cli-flags: an unknown flag suggests the closest one" 2
  ARGS --config presets/laptop.yaml --n-predct 5 --print-config
  STDERR "^\\[k3host\\] error: unknown flag --n-predct \\(did you mean --n-predict\\?\\)")
k3_cli_test("cli-flags: a subcommand's own flag of a refused name is its own" 0
  ARGS serve --help
  STDOUT "--port")
k3_cli_test("cli-flags: --help lists the short flags" 0
  ARGS --help
  STDOUT "-m,--model.*-p,--prompt.*-f,--file.*-n,--max-tokens.*-t,--threads.*-c,--context.*--temp.*--top-p.*--seed.*--version")

# The main job on a synthetic model (make-model's tiny geometry, written once for these tests):
# it says the weights are random and whether the pipeline holds the model or streams it, and
# prints sizes in one unit system (decimal GB/MB, as the *_gb keys).
set(_k3_flags_model ${CMAKE_BINARY_DIR}/test-tmp/cli-flags/tiny)
add_test(NAME "cli-flags: write the tiny model"
         COMMAND $<TARGET_FILE:k3host> make-model -g tiny -o ${_k3_flags_model} --force -q)
set_tests_properties("cli-flags: write the tiny model" PROPERTIES FIXTURES_SETUP k3_cli_flags_model)
k3_cli_test("cli-flags: a synthetic model's run says so, and that it is fully resident" 0
  ARGS --config presets/laptop.yaml -m ${_k3_flags_model} -n 2 --ids 1,2,3
  STDERR "synthetic K3 checkpoint[^\n]*noise by design.*fully resident: the whole model is held in memory"
  STDOUT "peak RSS [0-9.]+ [kMG]B"
  STDERR_NOT "MiB|GiB"
  STDOUT_NOT "MiB|GiB")
k3_cli_test("cli-flags: a small budget says the run streams, and what" 0
  ARGS --config presets/laptop.yaml -m ${_k3_flags_model} -n 2 --ids 1,2,3 --set memory.trunk_gb=0.00002
       --set memory.expert_cache_gb=0.000001
  STDERR "streaming: [0-9]+ of [0-9]+ trunk layers pinned[^\n]*expert cache of [0-9]+ of [0-9]+ routed experts"
  STDOUT "read: trunk [0-9.]+ [kMG]?B"
  STDERR_NOT "MiB|GiB"
  STDOUT_NOT "MiB|GiB")
set_tests_properties("cli-flags: a synthetic model's run says so, and that it is fully resident"
                     "cli-flags: a small budget says the run streams, and what"
                     PROPERTIES FIXTURES_REQUIRED k3_cli_flags_model)
