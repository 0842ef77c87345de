// The flags people already type (-m -n -t -c --temp --top-p --seed -p -f ...): each one stands
// for one pipeline key and becomes an override of it, with the flag as its origin, so
// --print-config and every error name the flag the value came from (docs/pipelines.md,
// "Command-line flags").
#include <k3/error.hpp>

#include "cli.hpp"

namespace k3::cli {

namespace {

/// How a flag's value is written into the override.
enum class Value {
  yaml,    ///< as typed: the schema checks it (numbers; "--temp abc" is refused naming --temp)
  text,    ///< a string kept exactly (quoted for YAML): prompts and paths
  list,    ///< a comma-separated list: "1,2,3" -> [1,2,3]
};

struct FlagSpec {
  const char* names;   ///< CLI11 names, e.g. "-n,--max-tokens"
  const char* key;     ///< the pipeline key it sets
  Value value;
  const char* type;    ///< shown in --help
  const char* help;
};

// In --help order.
constexpr FlagSpec kFlags[] = {
    {"-m,--model", "model.path", Value::text, "PATH", "Checkpoint folder or URL (sets model.path)"},
    {"-p,--prompt", "job.prompt", Value::text, "TEXT", "Prompt text (sets job.prompt); an empty one is refused"},
    {"-f,--file,--prompt-file", "job.prompt_file", Value::text, "FILE",
     "File holding the prompt text (sets job.prompt_file); checked before the model loads"},
    {"--ids", "job.ids", Value::list, "IDS", "Prompt as token ids, comma-separated (sets job.ids)"},
    {"-n,--max-tokens", "job.max_new_tokens", Value::yaml, "N", "Tokens to generate (sets job.max_new_tokens)"},
    {"-t,--threads", "threads", Value::yaml, "N", "Compute threads, 0 = every CPU (sets threads)"},
    {"-c,--context", "memory.context", Value::yaml, "N",
     "Context length in tokens the plan reserves (sets memory.context)"},
    {"--temp", "job.sampling.temperature", Value::yaml, "T",
     "Sampling temperature, 0 = greedy (sets job.sampling.temperature)"},
    {"--top-p", "job.sampling.top_p", Value::yaml, "P", "Nucleus sampling threshold (sets job.sampling.top_p)"},
    {"--seed", "job.sampling.seed", Value::yaml, "N", "Sampling seed (sets job.sampling.seed)"},
    {"--out", "job.report", Value::text, "FILE", "Write the JSON run report to FILE (sets job.report)"},
    {"--save-state", "job.save_state", Value::text, "FILE",
     "Save the conversation state after the run, an interrupted one too (sets job.save_state)"},
    {"--load-state", "job.load_state", Value::text, "FILE",
     "Resume a saved conversation (sets job.load_state); without a prompt it continues exactly where the "
     "saved run stopped"},
    {"--dump-logits", "job.dump_logits", Value::text, "FILE",
     "Write the prompt's logits as raw float32 [positions, vocab] (sets job.dump_logits)"},
};

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

}  // namespace

void add_pipeline_flags(CLI::App& app, GlobalOptions& global) {
  global.flags.resize(std::size(kFlags));
  for (std::size_t i = 0; i < std::size(kFlags); ++i) {
    const FlagSpec& f = kFlags[i];
    PipelineFlag& slot = global.flags[i];
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
    // An empty prompt or path would silently mean "the default" in the pipeline; refuse it.
    if (slot.value.empty())
      throw UsageError(flag + ": empty value" +
                       (std::string(f.key) == "job.prompt" ? " (an empty prompt; give text, --ids or --file)" : ""));
    // -c was --config before it was --context, as in most engines: say so, not "no pipeline".
    if (std::string(f.key) == "memory.context" && (slot.value.ends_with(".yaml") || slot.value.ends_with(".yml")))
      throw UsageError(flag + " " + slot.value + ": -c/--context is the context length in tokens; give the pipeline "
                       "with --config " + slot.value);
    std::string value = slot.value;
    if (f.value == Value::text) value = quote_yaml(value);
    if (f.value == Value::list) value = "[" + value + "]";
    out.push_back({std::string(f.key) + "=" + value, flag + " " + slot.value});
  }
  // --set last, in order: an explicit key=value wins over a flag for the same key.
  for (const auto& text : global.sets) out.push_back({text, "--set " + text});
  return out;
}

}  // namespace k3::cli
