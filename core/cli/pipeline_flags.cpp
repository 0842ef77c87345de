// The flags people already type (-m -n -t -c --temp --top-p --seed -p -f ..., llama.cpp's
// names among them): each one stands for one pipeline key and becomes an override of it,
// with the flag as its origin, so --print-config and every error name the flag the value
// came from (docs/pipelines.md, "Flags that stand for a key").
#include <k3/error.hpp>

#include "cli.hpp"

namespace k3::cli {

namespace {

/// How a flag's value is written into the override.
enum class Value {
  yaml,    ///< as typed: the schema checks it (numbers; "--temp abc" is refused naming --temp)
  text,    ///< a string kept exactly (quoted for YAML): prompts and paths
  list,    ///< ids separated by commas or spaces: "1,2,3", "1 2 3" -> [1, 2, 3]
  tokens,  ///< a count of tokens where -1 (or -2, llama.cpp's "until the context is full") is the most there can be
  fixed,   ///< a flag without a value: sets the key to FlagSpec::fixed
};

struct FlagSpec {
  const char* names;  ///< CLI11 names, e.g. "-n,--max-tokens"
  const char* key;    ///< the pipeline key it sets
  Value value;
  const char* type;  ///< shown in --help
  const char* help;
  const char* fixed = nullptr;  ///< Value::fixed: the value it sets
};

// In --help order. Other engines' names for the same thing are aliases (llama.cpp's
// --n-predict, --ctx-size, --temperature ...; docs/pipelines.md, "Flags that stand for a key").
constexpr FlagSpec kFlags[] = {
    {"-m,--model", "model.path", Value::text, "PATH", "Checkpoint folder or URL (sets model.path)"},
    {"-p,--prompt", "job.prompt", Value::text, "TEXT", "Prompt text (sets job.prompt); an empty one is refused"},
    {"-f,--file,--prompt-file", "job.prompt_file", Value::text, "FILE",
     "File holding the prompt text (sets job.prompt_file); checked before the model loads"},
    {"--ids", "job.ids", Value::list, "IDS", "Prompt as token ids, separated by commas or spaces (sets job.ids)"},
    {"-n,--max-tokens,--n-predict,--predict", "job.max_new_tokens", Value::tokens, "N",
     "Tokens to generate; -1 = until EOS or the context is full (sets job.max_new_tokens)"},
    {"-t,--threads", "threads", Value::yaml, "N", "Compute threads, 0 = every CPU (sets threads)"},
    {"-c,--context,--ctx-size", "memory.context", Value::yaml, "N",
     "Context length in tokens the plan reserves; generation stops when it is full (sets memory.context)"},
    {"-b,--batch-size", "job.prefill_chunk", Value::yaml, "N",
     "Prompt tokens per prefill chunk (sets job.prefill_chunk)"},
    {"--temp,--temperature", "job.sampling.temperature", Value::yaml, "T",
     "Sampling temperature, 0 = greedy (sets job.sampling.temperature)"},
    {"--top-k", "job.sampling.top_k", Value::yaml, "K",
     "Sample among the K most likely tokens, 0 = all (sets job.sampling.top_k)"},
    {"--top-p", "job.sampling.top_p", Value::yaml, "P", "Nucleus sampling threshold (sets job.sampling.top_p)"},
    {"--min-p", "job.sampling.min_p", Value::yaml, "P",
     "Sample among tokens at least P times as likely as the first (sets job.sampling.min_p)"},
    {"--repeat-penalty", "job.sampling.repeat_penalty", Value::yaml, "X",
     "Penalise the ids of the last --repeat-last-n tokens, 1 = off (sets job.sampling.repeat_penalty)"},
    {"--repeat-last-n", "job.sampling.repeat_last_n", Value::yaml, "N",
     "Tokens the repeat penalty looks back over, -1 = the whole context (sets job.sampling.repeat_last_n)"},
    {"-s,--seed", "job.sampling.seed", Value::yaml, "N", "Sampling seed (sets job.sampling.seed)"},
    {"--ignore-eos", "job.stop_at_eos", Value::fixed, "", "Generate past the model's EOS (sets job.stop_at_eos: false)",
     "false"},
    {"--model-draft", "job.speculative.draft_model", Value::text, "PATH",
     "Draft model for exact speculative decoding, also -md (sets job.speculative.draft_model)"},
    {"--draft-max,--draft,--draft-n", "job.speculative.max_draft", Value::yaml, "N",
     "Drafted tokens checked per forward pass, 0 = off (sets job.speculative.max_draft)"},
    {"--draft-p-min", "job.speculative.draft_min_p", Value::yaml, "P",
     "The draft model stops at a token it gives less than P (sets job.speculative.draft_min_p)"},
    {"--prompts", "job.prompts", Value::text, "FILE",
     "Run every prompt of FILE (one per line, or JSON Lines with settings), together (sets job.prompts)"},
    {"--results", "job.results", Value::text, "FILE",
     "With --prompts: write the JSON Lines results to FILE instead of stdout (sets job.results)"},
    {"--parallel", "serve.parallel", Value::yaml, "N",
     "Sequences serve and --prompts decode together, 0 = as many as the memory plan holds (sets serve.parallel)"},
    {"--out", "job.report", Value::text, "FILE", "Write the JSON run report to FILE (sets job.report)"},
    {"--save-state", "job.save_state", Value::text, "FILE",
     "Save the conversation state after the run, an interrupted one too (sets job.save_state)"},
    {"--load-state", "job.load_state", Value::text, "FILE",
     "Resume a saved conversation (sets job.load_state); without a prompt it continues exactly where the "
     "saved run stopped"},
    {"--dump-logits", "job.dump_logits", Value::text, "FILE",
     "Write the prompt's logits as raw float32 [positions, vocab] (sets job.dump_logits)"},
};

/// The most tokens job.max_new_tokens takes (its schema range).
constexpr const char* kMostTokens = "1048576";

/// A YAML double-quoted scalar, so any text survives unchanged.
std::string quote_yaml(const std::string& v) {
  std::string out = "\"";
  for (const char ch : v) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default: out += ch;
    }
  }
  return out + "\"";
}

/// "--max-tokens" from "-n,--max-tokens": the long name, as messages show it.
std::string long_name(const char* names) {
  const std::string all = names;
  const std::size_t at = all.find("--");
  const std::size_t end = all.find(',', at);
  return all.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

/// "1,2 3" -> "1, 2, 3": ids separated by commas, spaces or both.
std::string id_list(const std::string& v) {
  std::string out;
  std::size_t at = 0;
  while (at < v.size()) {
    const std::size_t begin = v.find_first_not_of(", \t\n", at);
    if (begin == std::string::npos) break;
    const std::size_t end = std::min(v.find_first_of(", \t\n", begin), v.size());
    out += (out.empty() ? "" : ", ") + v.substr(begin, end - begin);
    at = end;
  }
  return out;
}

}  // namespace

std::vector<std::string> split_ids(const std::string& text) {
  std::vector<std::string> out;
  const std::string joined = id_list(text);
  std::size_t at = 0;
  while (at < joined.size()) {
    const std::size_t end = std::min(joined.find(", ", at), joined.size());
    out.push_back(joined.substr(at, end - at));
    at = end + 2;
  }
  return out;
}

const PipelineFlag* given_flag(const GlobalOptions& global, std::string_view key) {
  for (std::size_t i = 0; i < std::size(kFlags) && i < global.flags.size(); ++i)
    if (kFlags[i].key == key && global.flags[i].option != nullptr && global.flags[i].option->count() > 0)
      return &global.flags[i];
  return nullptr;
}

void add_pipeline_flags(CLI::App& app, GlobalOptions& global) {
  global.flags.resize(std::size(kFlags));
  for (std::size_t i = 0; i < std::size(kFlags); ++i) {
    const FlagSpec& f = kFlags[i];
    PipelineFlag& slot = global.flags[i];
    if (f.value == Value::fixed)
      slot.option = app.add_flag(f.names, f.help);
    else
      slot.option = app.add_option(f.names, slot.value, f.help)->type_name(f.type);
  }
}

std::vector<Override> pipeline_overrides(const GlobalOptions& global) {
  std::vector<Override> out;
  for (std::size_t i = 0; i < std::size(kFlags) && i < global.flags.size(); ++i) {
    const FlagSpec& f = kFlags[i];
    const PipelineFlag& slot = global.flags[i];
    if (slot.option == nullptr || slot.option->count() == 0) continue;
    const std::string flag = long_name(f.names);
    if (f.value == Value::fixed) {
      out.push_back({std::string(f.key) + "=" + f.fixed, flag});
      continue;
    }
    // An empty prompt or path would silently mean "the default" in the pipeline; refuse it.
    if (slot.value.empty())
      throw UsageError(flag + ": empty value" +
                       (std::string(f.key) == "job.prompt" ? " (an empty prompt; give text, --ids or --file)" : ""));
    // -c was --config before it was --context, as in most engines: say so, not "no pipeline".
    if (std::string(f.key) == "memory.context" && (slot.value.ends_with(".yaml") || slot.value.ends_with(".yml")))
      throw UsageError(flag + " " + slot.value +
                       ": -c/--context is the context length in tokens; give the pipeline "
                       "with --config " +
                       slot.value);
    std::string value = slot.value;
    if (f.value == Value::text) value = quote_yaml(value);
    if (f.value == Value::list) value = "[" + id_list(value) + "]";
    if (f.value == Value::tokens && (value == "-1" || value == "-2")) value = kMostTokens;
    out.push_back({std::string(f.key) + "=" + value, flag + " " + slot.value});
  }
  // --set last, in order: an explicit key=value wins over a flag for the same key.
  for (const auto& text : global.sets) out.push_back({text, "--set " + text});
  return out;
}

}  // namespace k3::cli
