// THE pipeline schema. Adding a key: add one row here (type, default, range, a one-line
// meaning with units, and why the default), then regenerate the reference in
// docs/pipelines.md: K3_UPDATE_DOCS=1 build/bin/k3test-config "[docs]".
#include "config/schema.hpp"

#include "config/scalar_text.hpp"

#include <k3/closest_name.hpp>


namespace k3::config {

namespace {

Range at_least(double min) { return Range{min, std::nullopt, false, false}; }
Range between(double min, double max) { return Range{min, max, false, false}; }

// A table, one key an entry (name, type, default, range, choices, doc, why): kept as written.
// clang-format off
std::vector<KeySpec> build_schema() {
  using T = ValueType;
  return {
      {"extends", T::path, "''", {}, {},
       "Pipeline file this one builds on, relative to this file; its keys are read first and this file's keys win",
       "a file stands alone unless it says what it extends", true},
      {"description", T::string, "''", {}, {}, "One line saying what the pipeline is for; --list-presets prints it",
       "empty: a pipeline needs no description to run"},
      {"plugin_path", T::path_list, "[]", {}, {},
       "Extra folders searched for plugins, after the built-in folder and K3_PLUGIN_PATH",
       "the built-in plugins need no path"},

      {"model.path", T::path, "demo", {}, {},
       "Checkpoint folder or URL (`config.json`, `*.safetensors`, `tiktoken.model`, `tokenizer_config.json`), every "
       "file read through the storage plugin. The word `demo` stands for the synthetic demo checkpoint at "
       "model.demo_path, with model.geometry demo (a folder named demo in the working directory is ./demo)",
       "the demo model is generated on first use, so a pipeline without a model runs without a download; "
       "configs/default.yaml sets ../data/models/fortune, the small trained K3 the repository ships "
       "(docs/demo-model.md)"},
      {"model.geometry", T::name, "demo", {}, {},
       "Geometry `configs/models/<name>.yaml`: used to generate a missing model and by `plan` without weights",
       "demo is the synthetic default: a few hundred MB, with enough experts that streaming matters; "
       "configs/default.yaml sets fortune, the shipped model's"},
      {"model.demo_path", T::path, "models/demo", {}, {},
       "Folder of the synthetic demo checkpoint that `model.path: demo` (`-m demo`) selects; generated there on "
       "first use (400 MB, the streaming benchmarks' model)",
       "configs/default.yaml sets ../models/demo, the repository's models/demo from any folder; the installed copy "
       "sets the user's data folder, ${XDG_DATA_HOME:-${HOME}/.local/share}/k3host/models/demo"},
      {"model.packed_trunk", T::path, "''", {}, {},
       "Folder written by `k3host pack-trunk` from model.path: the trunk and tables are read from its trunk.bin, one "
       "4096-aligned read per layer (O_DIRECT friendly), instead of per tensor from the shards; refused when packed "
       "from another checkpoint, and every byte is checked against trunk.json as it is read",
       "a checkpoint works unpacked; packing is an optional speed-up"},
      {"model.generate_if_missing", T::boolean, "true", {}, {},
       "Write the synthetic model.geometry checkpoint to model.path when it has no config.json and is the demo "
       "location (the model.demo_path configs/default.yaml names); any other missing model.path is an error (exit 2)",
       "the main command must work on a fresh machine; set false to make a missing demo checkpoint an error too"},

      {"model.thinking", T::choice, "auto", {}, {"auto", "on", "off"},
       "Whether `chat` and `serve` answer with K3's think channel open unless a request or command says otherwise "
       "(--think/--no-think, /think, reasoning_effort): auto = what the checkpoint's config.json says "
       "(`k3host_thinking: false` for a model trained without the think channel), on when it says nothing",
       "auto: the model's own training decides; the released K3 thinks, the shipped fortune models (plain text) "
       "do not, and a model left in its think channel answers nothing (docs/chat.md, \"Thinking\")"},

      {"storage.plugin", T::name, "posix", {}, {},
       "Storage plugin that reads the checkpoint (posix, direct, mmap, uring, http, tiered, throttle, faulty, synthetic)",
       "posix (buffered pread) works on every file system"},
      {"storage.params", T::params, "{}", {}, {}, "Parameters for the storage plugin (see its README)",
       "every plugin has working defaults"},

      {"cache.policy", T::name, "nextuse", {}, {},
       "Expert cache policy plugin (nextuse, lru, s3fifo, lfu, sieve, lecar, belady)",
       "the best online policy on every trace family of docs/cache.md, \"The evaluation\""},
      {"cache.params", T::params, "{}", {}, {}, "Parameters for the cache policy plugin",
       "every plugin has working defaults"},
      {"cache.future", T::path, "''", {}, {},
       "Expert trace of an earlier run of the same prompt and checkpoint (trace.out); the belady policy reads the "
       "future from it",
       "only belady needs the future"},
      {"cache.prefetch.depth", T::integer, "1", between(0, 4), {},
       "Router lookahead: while a MoE layer computes, the routers of this many next layers (those at hand) predict "
       "their experts from its input and the likely misses are read ahead; 0 = off (docs/cache.md, "
       "\"Router-lookahead prefetch\")",
       "1: on an otherwise idle machine behind a throttled link it cut the I/O wait per token to 0.58-0.81 and "
       "s/token to 0.82-0.89 of prefetch off (demo at 1 and 2 threads, the trained model at 1); depth 2 guessed "
       "worse; it costs nothing while every expert is resident (docs/cache.md, \"Router-lookahead prefetch\")"},
      {"cache.prefetch.router", T::choice, "auto", {}, {"auto", "exact", "int8", "int4"},
       "Router lookahead: what predicts a streamed MoE layer whose router is not in memory yet. exact: nothing "
       "(only routers at hand: pinned layers, ring slots read ahead); int8, int4: a resident copy of every streamed "
       "MoE layer's router quantised to 8 or 4 bits a weight, a line of the memory plan; auto: the most precise copy "
       "that adds at most a sixteenth to the rest of the plan, else exact (docs/cache.md, \"Router-lookahead "
       "prefetch\")",
       "prediction only chooses what to read early, so an approximate router is enough; without it an I/O-bound run "
       "predicted nothing at K3's laptop budget (no layer pinned, none read ahead when its predecessor computes)"},
      {"cache.prefetch.mb_per_token", T::number, "0", at_least(0), {},
       "Router lookahead: the most MB (1e6 bytes) read ahead per token of a forward pass, spread evenly over the MoE "
       "layers (each prediction may read mb_per_token × tokens ÷ MoE layers); 0 = no byte limit (only the slots "
       "free or evictable)",
       "the free and evictable slots already bound it; a limit keeps the router's most confident guesses: on the demo "
       "model a cap of half the top-k cut the bytes wasted on wrong guesses to a third"},

      {"kernels.set", T::name, "auto", {}, {},
       "Kernel set (scalar, avx2, avx512, neon); auto picks the highest-scoring set this CPU runs",
       "every set gives bit-identical results, so the fastest runnable one is the right default"},
      {"kernels.params", T::params, "{}", {}, {}, "Parameters for the kernel set", "every plugin has working defaults"},

      {"tokenizer.plugin", T::name, "tiktoken", {}, {}, "Tokenizer plugin",
       "K3 ships a tiktoken rank file"},
      {"tokenizer.params", T::params, "{}", {}, {},
       "Parameters for the tokenizer (tiktoken: pattern kimi/cl100k/o200k, ...)",
       "configs/default.yaml sets the Kimi pattern"},

      {"threads", T::integer, "0", between(0, 4096), {}, "Compute threads; 0 = every logical CPU",
       "results are bit-identical for any count, so use the whole machine"},

      {"memory.trunk_gb", T::budget, "3", Range{0, 4096, true, false}, {},
       "Budget for resident trunk layers plus the trunk ring, GB (1e9 bytes), or fit",
       "3 GB is the laptop floor; presets set their own"},
      {"memory.expert_cache_gb", T::budget, "1", between(0, 4096), {},
       "Budget for the routed-expert cache, GB (1e9 bytes), or fit",
       "1 GB is the laptop floor; presets set their own"},
      {"memory.budgets_for", T::choice, "model", {}, {"model", "k3"},
       "Whose bytes trunk_gb and expert_cache_gb are: model, this model's; k3, the released K3's, so a smaller "
       "model gets each budget scaled by its size (its trunk bytes over K3's, its expert bytes over K3's; at least "
       "one ring slot and top-k expert slots) and a preset streams it as it streams K3; `model.path: demo` (-m "
       "demo) sets k3 unless set with it or later",
       "a budget is memory this machine gives; the synthetic demo stands in for K3, so its presets are K3's scaled "
       "down (docs/pipelines.md, \"Presets\")"},
      {"memory.stream_embedding", T::boolean, "false", {}, {},
       "Stream embedding rows and lm_head chunks from storage instead of keeping them resident",
       "resident is faster; only the ultra preset needs the memory back"},
      {"memory.split_dense_ffn", T::choice, "auto", {}, {"auto", "on", "off"},
       "A streamed dense layer keeps only its attention in a ring slot and multiplies its FFN while reading it in "
       "row chunks; auto does so when that streams fewer trunk bytes per token",
       "K3's dense layer 0 is 2.34 GB, nearly twice any other layer: splitting it shrinks the ring slot to 1.27 GB"},
      {"memory.row_chunk_mb", T::number, "33.554432", between(0.001, 4096), {},
       "Size of each of the two row-chunk buffers (streamed lm_head, split dense FFN), MB (1e6 bytes); at least one "
       "row is always read",
       "32 MiB: large sequential reads, small next to the other budgets"},
      {"memory.context", T::integer, "4096", between(1, 1048576), {},
       "Tokens of context (prompt + generated) the plan reserves KV cache and state for",
       "enough for a conversation while keeping the latent cache small; K3 allows 1048576"},

      {"job.prompt", T::string, "''", {}, {},
       "Prompt text, encoded with the tokenizer section; with job.load_state, only a prompt set outside "
       "configs/default.yaml is used",
       "configs/default.yaml sets a short English prompt"},
      {"job.prompt_file", T::path, "''", {}, {}, "File whose UTF-8 text is the prompt; wins over job.prompt",
       "prompts are usually short enough to write inline"},
      {"job.prompts", T::path, "''", {}, {},
       "A file of prompts run together instead of job.prompt: one per line, or JSON Lines with per-prompt settings "
       "(prompt or ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed); "
       "serve.parallel of them are decoded together, each giving what it gives alone; one JSON result per prompt, "
       "in input order, goes to job.results or stdout (docs/pipelines.md, \"Many prompts\")",
       "a run is one prompt unless asked"},
      {"job.results", T::path, "''", {}, {},
       "With job.prompts: write the JSON Lines results here (whole, when the run ends) instead of to stdout",
       "stdout, as each prompt and those before it finish"},
      {"job.ids", T::int_list, "[]", at_least(0), {},
       "Prompt as token ids; wins over job.prompt_file and job.prompt", "text prompts are the common case"},
      {"job.max_new_tokens", T::integer, "16", between(0, 1048576), {},
       "Tokens to generate (generation also stops at end-of-sequence); 0 = prefill only",
       "enough to see the model continue the prompt, quick even when streaming"},
      {"job.mode", T::choice, "incremental", {}, {"incremental", "recompute"},
       "incremental: prefill, then one token per step with carried state; recompute: the whole sequence every "
       "step (a check, O(T^2))",
       "incremental is the fast path; both give bit-identical logits"},
      {"job.prefill_chunk", T::integer, "64", between(1, 65536), {},
       "Prompt tokens per prefill chunk (one expert read serves every token of the chunk that chose it)",
       "the reference engine's chunk; there it halved expert bytes on a 40-token prompt, with small buffers"},
      {"job.speculative.max_draft", T::integer, "4", between(0, 64), {},
       "Exact speculative decoding: after each token, draft up to this many by prompt lookup and check them in one "
       "forward pass, keeping what the model itself picks (same ids as plain decoding); 0 = off",
       "on the trained demo model's held-out text (greedy) it feeds 1.3 tokens per forward pass and reads 0.79x the "
       "bytes per token at a laptop-scaled budget (0.86x at K3's trunk/expert mix); more drafts are kept too "
       "seldom to pay (docs/speculative.md)"},
      {"job.speculative.adaptive", T::boolean, "true", {}, {},
       "Draft fewer than max_draft (none but a probe every 4 steps) while drafts are seldom kept: the k-th draft "
       "only while the chance it is kept exceeds 0.12, about what a position's expert reads cost next to a forward "
       "pass",
       "sampled text is rarely predicted by lookup, and a refused draft still reads its experts"},
      {"job.speculative.ngram", T::integer, "3", between(1, 64), {},
       "Longest context suffix whose latest earlier occurrence supplies the drafts",
       "a 3-token match is rarely wrong, and shorter ones are tried after it"},
      {"job.speculative.min_ngram", T::integer, "1", between(1, 64), {},
       "Shortest suffix tried when the longer ones do not occur earlier (at most job.speculative.ngram)",
       "a one-token match still pays when each forward pass reads the whole trunk; with a datastore, matches of 2+ "
       "tokens come first, then the corpus, then this"},
      {"job.speculative.datastore", T::path, "''", {}, {},
       "Text like what the model will write (its training text, a code base); when the context offers no draft, "
       "drafts come from this corpus's most frequent continuations (8 bytes per token of it in memory)",
       "a corpus is the user's to choose"},
      {"job.speculative.draft_model", T::path, "''", {}, {},
       "A small checkpoint with the model's tokenizer (a folder or URL, read through the storage plugin) that "
       "drafts instead of lookup and datastore: its own pick of each next token, drawn like the model's (same "
       "seed and position); held in memory beside the plan, refused if it would stream",
       "a draft model is trained for one model: data/models/fortune-draft is fortune's (docs/speculative.md)"},
      {"job.speculative.draft_min_p", T::number, "0.06", between(0, 1), {},
       "The draft model stops drafting at a token it gives less than this probability (softmax at the sampling "
       "temperature, 1 when greedy); 0 = up to the number of drafts allowed",
       "a doubtful draft is seldom kept and still reads its experts; with fortune's draft model 0.06 read the fewest "
       "bytes per token of 0-0.6, greedy and sampled (docs/speculative.md)"},
      {"job.sampling.temperature", T::number, "0", between(0, 100), {},
       "Sampling temperature; 0 = greedy (argmax)", "greedy output is reproducible and what the oracle tests check"},
      {"job.sampling.top_k", T::integer, "0", between(0, 1048576), {},
       "Sample among the k most likely tokens; 0 = no limit", "no truncation unless asked"},
      {"job.sampling.top_p", T::number, "1", Range{0, 1, true, false}, {},
       "Sample from the smallest set of tokens whose probability reaches p; 1 = no limit",
       "no truncation unless asked"},
      {"job.sampling.min_p", T::number, "0", between(0, 1), {},
       "Sample only among the tokens whose probability (after top_k and top_p, at the temperature) is at least "
       "min_p times the most likely one's; 0 = no limit",
       "no truncation unless asked"},
      {"job.sampling.repeat_penalty", T::number, "1", Range{0, 100, true, false}, {},
       "llama.cpp's repeat penalty, applied to the logits first (greedy too): the logit of each id among the last "
       "job.sampling.repeat_last_n ids of the context (prompt included) is divided by it when positive, multiplied "
       "by it otherwise; above 1 discourages repeats; 1 = off",
       "the model's own distribution unless asked: at 1 no output changes"},
      {"job.sampling.repeat_last_n", T::integer, "64", between(-1, 1048576), {},
       "Ids of the context the repeat penalty looks back over; 0 = none, -1 = the whole context",
       "llama.cpp's default window"},
      {"job.sampling.seed", T::integer, "0", at_least(0), {},
       "Seed of the sampling random stream; the same seed gives the same tokens", "a fixed seed keeps runs repeatable"},
      {"job.stop_at_eos", T::boolean, "true", {}, {},
       "Stop generating when the model emits its eos_token_id", "a finished answer should end the run"},
      {"job.dump_logits", T::path, "''", {}, {},
       "Write the prompt's logits here: raw little-endian float32 [positions, vocab] of every id the prefill feeds "
       "(a loaded state's pending ids, then the prompt; oracle tests)",
       "a debugging and testing aid; off unless asked"},
      {"job.report", T::path, "''", {}, {},
       "Write the run report as JSON here (prompt and generated ids, per-step times, bytes read, peak RSS, "
       "\"exit_code\" and \"failure\"); an interrupted run's too, with \"interrupted\": true, and one that fails "
       "part way (exit 1, 4) with the reason in \"failure\"",
       "the report is also printed; a file only when asked"},
      {"job.save_state", T::path, "''", {}, {},
       "Save the conversation state here after the run, an interrupted one too, with the ids not fed yet (not "
       "when the stop cut a storage wait short: the session then holds part of a forward pass; needs job.mode "
       "incremental)",
       "nothing is saved unless asked"},
      {"job.load_state", T::path, "''", {}, {},
       "Resume from this state file: its pending ids are fed first, then the prompt if one was given outside "
       "configs/default.yaml; without one the run continues where the saved one stopped (needs job.mode "
       "incremental)",
       "a run starts fresh unless asked"},
      {"job.accept_unsound_state", T::boolean, "false", {}, {},
       "Load a job.load_state file marked unsound (saved by a run in which a routed expert failed to load, so its "
       "state is not the model's) instead of refusing it; what it saves stays marked",
       "an unsound state continues another conversation than the model's; refused unless asked"},

      {"serve.parallel", T::integer, "0", between(0, 64), {},
       "Sequences `k3host serve` and `k3host --prompts` decode together: each engine step is one forward pass over "
       "every active sequence's next token and drafts (and prompt chunks), reading each trunk layer and routed expert "
       "once for all; each sequence has its own KDA state, MLA KV cache of memory.context positions and journals, all "
       "in the memory plan; 0 = auto: the most, up to 8, whose sequences take at most a quarter of the available "
       "memory in a plan that fits; a run of one prompt plans 1",
       "a streamed model's cost per token is the bytes it reads, and a step reads them once for every sequence; the "
       "plan knows what each sequence costs"},
      {"serve.prefill_budget", T::integer, "0", between(0, 65536), {},
       "Prompt tokens one engine step of several sequences feeds in all, shared by the prompts being prefilled "
       "(oldest first, each at most job.prefill_chunk) beside the decoding sequences' tokens: a long prompt is "
       "prefilled over several steps instead of delaying the other streams' next token by its whole prefill; 0 = "
       "job.prefill_chunk",
       "one prefill chunk per step keeps a step's cost near a decode step's while the prompt still advances"},

      {"cluster.transport", T::name, "none", {}, {},
       "How the ranks of a model split over processes or machines reach each other (docs/cluster.md): none (one "
       "process holds every layer) or a transport plugin (mpi: run every rank under mpirun); rank 0 runs the job, "
       "each rank its range of layers",
       "one machine needs no transport"},
      {"cluster.params", T::params, "{}", {}, {}, "Parameters for the transport plugin (see its README)",
       "every plugin has working defaults"},
      {"cluster.layers", T::string, "auto", {}, {},
       "The layers each rank holds: auto (contiguous ranges balanced by the bytes of their trunk and routed experts) "
       "or one inclusive range per rank in order, comma-separated, covering every layer (\"0-3,4-9,10-11\")",
       "balanced ranges put the same share of the model on every machine"},
      {"cluster.ranks", T::params, "{}", {}, {},
       "Per-rank settings: cluster.ranks.N.KEY (e.g. cluster.ranks.2.memory.trunk_gb: 4) sets KEY for rank N only, "
       "over everything else; KEY is any key outside cluster.*",
       "machines of different sizes work together"},
      {"cluster.timeout_s", T::number, "0", at_least(0), {},
       "Seconds a rank waits for its peer's next message before it ends the run (exit 1); 0 = no limit (a dead "
       "rank is reported by mpirun, which ends the others)",
       "a server's ranks wait as long as no request comes"},

      {"trace.out", T::path, "''", {}, {},
       "Record the expert request trace (token, layer, expert) here, for `sim` and cache.future; an interrupted "
       "run's trace is complete for the ids it fed",
       "tracing costs a write per layer; off unless asked"},
  };
}
// clang-format on

}  // namespace

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> table = build_schema();
  return table;
}

const KeySpec* find_key(std::string_view dotted) {
  for (const auto& spec : schema())
    if (spec.key == dotted) return &spec;
  return nullptr;
}

bool is_section(std::string_view dotted) {
  for (const auto& spec : schema())
    if (spec.key.size() > dotted.size() && spec.key.substr(0, dotted.size()) == dotted &&
        spec.key[dotted.size()] == '.')
      return true;
  return false;
}

bool is_inside_params(std::string_view dotted) {
  for (const auto& spec : schema())
    if (spec.type == ValueType::params && dotted.size() > spec.key.size() &&
        dotted.substr(0, spec.key.size()) == spec.key && dotted[spec.key.size()] == '.')
      return true;
  return false;
}

std::string closest_key(std::string_view dotted) {
  std::vector<std::string> candidates;
  for (const auto& spec : schema()) {
    if (spec.file_only && dotted.find('.') != std::string_view::npos) continue;
    const std::string key(spec.key);
    candidates.push_back(key);
    for (std::size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1))
      candidates.push_back(key.substr(0, dot));
  }
  return closest_name(dotted, candidates);
}

std::string_view type_name(ValueType type) {
  switch (type) {
    case ValueType::string: return "string";
    case ValueType::name: return "name";
    case ValueType::choice: return "choice";
    case ValueType::integer: return "integer";
    case ValueType::number: return "number";
    case ValueType::boolean: return "bool";
    case ValueType::budget: return "GB or fit";
    case ValueType::path: return "path";
    case ValueType::path_list: return "list of paths";
    case ValueType::int_list: return "list of integers";
    case ValueType::params: return "map";
  }
  return "?";
}

std::string range_text(const KeySpec& spec) {
  if (spec.type == ValueType::choice) {
    std::string out;
    for (const auto& c : spec.choices) out += (out.empty() ? "" : ", ") + std::string(c);
    return out;
  }
  const Range& r = spec.range;
  if (r.min && r.max) {
    if (!r.min_open && !r.max_open) return format_number(*r.min) + " – " + format_number(*r.max);
    return std::string(r.min_open ? "(" : "[") + format_number(*r.min) + ", " + format_number(*r.max) +
           (r.max_open ? ")" : "]");
  }
  if (r.min) return std::string(r.min_open ? "> " : ">= ") + format_number(*r.min);
  if (r.max) return std::string(r.max_open ? "< " : "<= ") + format_number(*r.max);
  return {};
}

}  // namespace k3::config
