# CLI tests of pipelines: --print-config, --list-presets, --print-schema, and bad pipelines
# (exit code 2 with a file:line:col message, nothing run). The fixtures are
# configs/test/bad-*.yaml.
include(${CMAKE_CURRENT_LIST_DIR}/lib/cli_check.cmake)

# k3_cli_config_test(NAME CODE ARGS <args...> [STDOUT regex] [STDERR regex]): lib/cli_check.cmake.
function(k3_cli_config_test name code)
  k3_cli_test("cli-config: ${name}" ${code} ${ARGN})
endfunction()

k3_cli_config_test("print-config shows the merged preset with origins" 0
  ARGS --config presets/laptop.yaml --print-config
  STDOUT "plugin: posix  # configs/default.yaml:[0-9]+:[0-9]+.*trunk_gb: 3  # presets/laptop.yaml:[0-9]+:[0-9]+")
k3_cli_config_test("print-config applies --set in order" 0
  ARGS --config presets/ultra.yaml --set memory.expert_cache_gb=2 --set memory.expert_cache_gb=4.5 --print-config
  STDOUT "expert_cache_gb: 4.5  # --set memory.expert_cache_gb=4.5.*stream_embedding: true  # presets/ultra.yaml")
k3_cli_config_test("list-presets prints every preset from the files, smallest first" 0
  ARGS --list-presets --presets-dir presets
  STDOUT "ultra +1.6 +0.31 .*laptop +3 +1 .*desktop +16 +10 .*workstation +60 +30 .*server +110 +13 .*max +110 +109 .*auto +fit +fit ")
k3_cli_config_test("print-schema prints the key reference" 0
  ARGS --print-schema
  STDOUT "`memory.trunk_gb` \\| GB or fit \\|")
k3_cli_config_test("a YAML alias inside itself is exit 2, not a stack overflow" 2
  ARGS --config configs/test/bad-alias-loop.yaml --print-config
  STDERR "bad-alias-loop.yaml:2:[0-9]+: an alias that contains itself")
k3_cli_config_test("a one-character file that yaml-cpp reads as endless documents is exit 2" 2
  ARGS --config configs/test/bad-comma.yaml --print-config
  STDERR "bad-comma.yaml:[0-9]+:[0-9]+: a pipeline file holds one YAML document, found a second")
k3_cli_config_test("a second YAML document is exit 2 at its line" 2
  ARGS --config configs/test/bad-two-documents.yaml --print-config
  STDERR "bad-two-documents.yaml:3:1: a pipeline file holds one YAML document, found a second")
k3_cli_config_test("nesting deeper than 64 levels is exit 2" 2
  ARGS --config configs/test/bad-deep.yaml --print-config
  STDERR "bad-deep.yaml:2:[0-9]+: nested more than 64 levels deep")
k3_cli_config_test("a device as the pipeline is exit 2, never an endless read" 2
  ARGS --config /dev/zero --print-config
  STDERR "pipeline file: /dev/zero: a character device, not a pipeline file")
k3_cli_config_test("a YAML syntax error is exit 2 with file:line:col" 2
  ARGS --config configs/test/bad-syntax.yaml --print-config
  STDERR "\\[k3host\\] error: configs/test/bad-syntax.yaml:[0-9]+:[0-9]+: YAML syntax error: ")
k3_cli_config_test("an unknown key is exit 2 with file:line:col and a suggestion" 2
  ARGS --config configs/test/bad-unknown-key.yaml --print-config
  STDERR "configs/test/bad-unknown-key.yaml:5:3: memory.expert_cache: unknown key \\(did you mean 'memory.expert_cache_gb'\\?\\)")
k3_cli_config_test("an out-of-range value is exit 2 with file:line:col" 2
  ARGS --config configs/test/bad-range.yaml --print-config
  STDERR "configs/test/bad-range.yaml:5:12: job.sampling.top_p: must be in \\(0, 1\\] \\(got 1.5\\)")
k3_cli_config_test("an extends cycle is exit 2 naming the files" 2
  ARGS --config configs/test/bad-cycle-a.yaml --print-config
  STDERR "extends: cycle: configs/test/bad-cycle-a.yaml -> configs/test/bad-cycle-b.yaml -> configs/test/bad-cycle-a.yaml")
k3_cli_config_test("a --set inside a value an earlier --set gave is exit 2 naming both" 2
  ARGS --config presets/laptop.yaml --set storage.params.inner=uring --set storage.params.inner.queue_depth=8
       --print-config
  STDERR "--set storage.params.inner.queue_depth=8: storage.params.inner.queue_depth: goes inside storage.params.inner, which is 'uring' \\(from --set storage.params.inner=uring\\), not a map")
k3_cli_config_test("a --set value over a map an earlier --set built is exit 2 naming both" 2
  ARGS --config presets/laptop.yaml --set storage.params.inner.queue_depth=8 --set storage.params.inner=uring
       --print-config
  STDERR "--set storage.params.inner=uring: storage.params.inner: would replace the map that --set storage.params.inner.queue_depth=8 built")
k3_cli_config_test("--set into a value a file gave is exit 2 naming the file" 2
  ARGS --config presets/laptop.yaml --set tokenizer.params.pattern.name=x --print-config
  STDERR "tokenizer.params.pattern.name: goes inside tokenizer.params.pattern, which is 'kimi' \\(from configs/default.yaml:[0-9]+:[0-9]+\\)")
k3_cli_config_test("--set keys under one map compose" 0
  ARGS --config presets/laptop.yaml --set storage.plugin=faulty --set storage.params.inner=uring
       --set storage.params.seed=3 --print-config
  STDOUT "inner: uring  # --set storage.params.inner=uring.*seed: 3  # --set storage.params.seed=3")
k3_cli_config_test("an unknown --set key is exit 2 naming the --set" 2
  ARGS --config presets/laptop.yaml --set memory.trunkgb=2 --print-config
  STDERR "--set memory.trunkgb=2: memory.trunkgb: unknown key")
k3_cli_config_test("an unknown plugin parameter is exit 2 with file:line:col, before the model loads" 2
  ARGS --config configs/test/bad-plugin-param.yaml --set model.path=configs/test/no-such-model
  STDERR "configs/test/bad-plugin-param.yaml:5:20: storage.params.read_ahead_kb: storage plugin 'posix' has no parameter 'read_ahead_kb': it takes none")
k3_cli_config_test("an unknown cache policy is exit 2 naming the --set" 2
  ARGS --config presets/laptop.yaml --set cache.policy=nope --set model.path=configs/test/no-such-model
  STDERR "--set cache.policy=nope: cache.policy: cache plugin 'nope' not found")
k3_cli_config_test("a missing pipeline file is exit 2" 2
  ARGS --config configs/test/no-such-file.yaml --print-config
  STDERR "pipeline file 'configs/test/no-such-file.yaml' does not exist")
k3_cli_config_test("a router-lookahead depth beyond 4 is exit 2 naming the --set" 2
  ARGS --config presets/laptop.yaml --set cache.prefetch.depth=5 --print-config
  STDERR "--set cache.prefetch.depth=5: cache.prefetch.depth:")
k3_cli_config_test("a negative prefetch byte budget is exit 2 naming the --set" 2
  ARGS --config presets/laptop.yaml --set cache.prefetch.mb_per_token=-1 --print-config
  STDERR "--set cache.prefetch.mb_per_token=-1: cache.prefetch.mb_per_token:")
