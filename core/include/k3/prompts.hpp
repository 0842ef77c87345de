// `k3host --prompts FILE`: many prompts generated together (docs/pipelines.md, "Many
// prompts"). The file holds one prompt per line, or JSON Lines with settings per prompt:
//
//   Life is
//   {"prompt": "Love is", "max_tokens": 8, "temperature": 0.7, "seed": 3}
//   {"ids": [3072, 258, 641], "top_k": 40}
//
// The prompts run through the step scheduler (k3/scheduler.hpp), serve.parallel of them at
// once, and each result is the one its prompt gives alone, bit for bit (each sampler draws
// by its own seed and positions; a batched pass gives each sequence its own logits). One
// JSON line per prompt, in input order, goes to job.results or stdout; the run report
// (job.report) adds the batch's figures: sequences per step, queue wait, time to first
// token, time between tokens, bytes read per generated token.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <k3/generate.hpp>
#include <k3/job.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>

namespace k3 {

/// One line of a prompts file.
struct PromptEntry {
  std::size_t line = 0;           ///< 1-based
  std::string text;               ///< the prompt text, unless ids are given
  std::vector<std::int64_t> ids;  ///< the prompt as token ids (checked against the vocabulary later)
  bool has_ids = false;
  /// Settings of this prompt over the pipeline's job section (JSON Lines only).
  std::optional<std::int64_t> max_tokens, top_k, repeat_last_n;
  std::optional<double> temperature, top_p, min_p, repeat_penalty;
  std::optional<std::uint64_t> seed;
};

/// The prompts of `file` (a regular file of at most kMaxTextFileBytes; `what` names where
/// it was set, "--prompts x: job.prompts"). JSON Lines when its first line that is not
/// blank starts with '{', else one prompt per line; blank lines are skipped. UsageError
/// "<what>: <file>:<line>: <reason>" for a line that is not a JSON object, nests deeper
/// than 64 levels, has an unknown key, a value of the wrong type or out of its range, both
/// or neither of "prompt" and "ids"; and for a file with no prompt.
std::vector<PromptEntry> read_prompts(const std::filesystem::path& file, const std::string& what);

/// What one prompt gave.
struct PromptResult {
  std::size_t index = 0;  ///< in the file's order, from 0
  std::size_t line = 0;
  std::vector<std::uint32_t> prompt_ids;
  GenerateResult result;
  std::string text;                ///< the generated ids decoded
  std::string error;               ///< non-empty: it failed (its ids are what it gave before)
  bool started = false;            ///< false: the run was stopped before its turn
  double queue_seconds = 0;        ///< from the start of the batch to its first step
  double first_token_seconds = 0;  ///< from its first step to its first token
  std::vector<double> token_gaps;  ///< seconds between its consecutive tokens
};

/// The JSON line of a result: {"index", "line", "prompt_tokens", "ids", "text",
/// "finish_reason"} (and "error"). No timings: a prompt's line is the same whatever ran
/// beside it.
std::string result_line(const PromptResult& r);

/// Percentiles of a set of seconds (nearest rank); zeros when empty.
struct Spread {
  std::size_t count = 0;
  double p50 = 0, p99 = 0, mean = 0;
};
Spread spread_of(std::vector<double> seconds);

struct PromptsReport {
  std::string model, kernels, storage;
  int threads = 0;
  std::int64_t context = 0;
  std::filesystem::path prompts_file, results_file, report_file;
  MemoryPlan plan;
  std::size_t parallel = 1;
  std::size_t prefill_budget = 0;
  std::vector<PromptResult> prompts;
  // The steps: forward passes, sequences in them summed, tokens fed, passes of n sequences.
  std::uint64_t steps = 0, step_sequences = 0, step_rows = 0;
  std::vector<std::uint64_t> steps_by_size;
  std::size_t most_in_flight = 0;  ///< passes in flight at once at most (a split model: up to the ranks)
  double load_seconds = 0;
  double batch_seconds = 0;     ///< from the first step to the last
  std::uint64_t generated = 0;  ///< tokens, all prompts
  StreamStats io;               ///< read during the batch (load excluded)
  Spread queue_wait, first_token, token_gap;
  std::uint64_t peak_rss = 0;
  bool interrupted = false;
  std::vector<std::string> expert_failures;
  int exit_code = 0;  ///< 0, 1 (a prompt failed), 4, 5
  std::string failure;
  [[nodiscard]] double tokens_per_second() const {
    return batch_seconds > 0 ? static_cast<double>(generated) / batch_seconds : 0;
  }
  [[nodiscard]] double bytes_per_token() const {
    const std::uint64_t read = io.trunk_bytes + io.expert_bytes + io.table_bytes;
    return generated ? static_cast<double>(read) / static_cast<double>(generated) : 0;
  }
};

struct PromptsHooks : LoadHooks {
  /// Each prompt's result and its JSON line, in input order, as soon as it and every prompt
  /// before it are done.
  std::function<void(const PromptResult&, const std::string& line)> on_result;
};

/// Runs job.prompts. UsageError (exit 2) before any compute for a bad file or prompt (naming
/// the file and line), for job keys that belong to a run of one prompt (job.load_state,
/// job.save_state, job.dump_logits, trace.out, job.mode recompute), and for outputs that
/// cannot be written; k3::Error(resource) when the plan does not fit. The results go to
/// job.results (written whole, atomically, at the end) when it is set; the report to
/// job.report.
PromptsReport run_prompts(const Pipeline& pipeline, PluginHost& host, const PromptsHooks& hooks = {});

/// The report as JSON (what job.report receives).
std::string prompts_report_json(const PromptsReport& report);

}  // namespace k3
